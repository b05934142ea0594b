--! include _fence
--! include _wake
--! include _dead
-- Files a fetched job in a sorted set (retry or dead) and takes it off the in-progress
-- list, in one step: a failure routed to retry/dead, an interruption, a bad payload.
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = zset: retry or dead
-- KEYS[3] = orphans: the job's orphan counter
-- KEYS[4] = fence: the list owner's fence
-- KEYS[5] = last_beat: the last_beat hash
-- KEYS[6] = queues: the known-queues set (a callback pushed)
-- KEYS[7] = wake: the wake stream
-- KEYS[8] = results_index: the kept results' index (retained:results)
-- KEYS[9] = batch_callbacks: the batch callbacks pushed, ever (a counter)
-- KEYS[10..] = declared(key): filing in dead, the keys named by data (_declared.lua): the
-- job's result, its chain's, its group's, its batch's (named by its payload), and a
-- callback's (read from a record, asked for by a {0, "need", name...} reply)
-- ARGV[1] = job: the job as fetched
-- ARGV[2] = score: its score
-- ARGV[3] = entry: the entry to file
-- ARGV[4] = dead: "dead" to trim the dead set
-- ARGV[5] = oldest: trim: oldest score kept
-- ARGV[6] = most: trim: most entries kept
-- ARGV[7] = identity: the owner's identity to refresh its beat, or "" (someone filing
-- for a gone process)
-- ARGV[8] = workflows: filing in dead, "1": a job of a workflow or batch settles its
-- result, chain, group and batch here too (_workflow.lua, _batch.lua); "": not looked at
-- ARGV[9] = now: epoch s
-- ARGV[10] = keep: the most results kept (status_max)
-- ARGV[11..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Refused (FENCED) if the owner was declared dead: its list was requeued, and the job
-- will run again elsewhere.
-- A no-op (0) if the job is no longer in progress: someone requeued it, and filing it
-- too would make two copies. {0, "need", name...}, nothing written: keys to declare.
local refused = fenced(KEYS[4])
if refused then return refused end
local listed = redis.call("LPOS", KEYS[1], ARGV[1])
declare(11)
dead_keys(KEYS[6], KEYS[7], KEYS[8], KEYS[9])
local settles = ARGV[4] == "dead" and ARGV[8] and ARGV[8] ~= ""
if listed and settles then
  local need = dead_needs(ARGV[3], ARGV[10])
  if need then return need end
end
beat(KEYS[5], ARGV[7])
if not listed then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[3])
if ARGV[4] == "dead" then
  if settles then
    dead_settle(ARGV[3], ARGV[9], ARGV[10], {})
  end
  redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
  redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -(tonumber(ARGV[6]) + 1))
end
return 1
