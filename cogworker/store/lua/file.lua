--! include _fence
--! include _wake
--! include _workflow
--! include _batch
-- Files a fetched job in a sorted set (retry or dead) and takes it off the in-progress
-- list, in one step: a failure routed to retry/dead, an interruption, a bad payload.
-- KEYS[1] = in-progress list, KEYS[2] = retry or dead, KEYS[3] = the job's orphan counter,
-- KEYS[4] = the list owner's fence, KEYS[5] = last_beat.
-- ARGV[1] = the job as fetched, ARGV[2] = score, ARGV[3] = the entry to file,
-- ARGV[4] = "dead" to trim the dead set, ARGV[5] = trim: oldest score kept,
-- ARGV[6] = trim: most entries kept, ARGV[7] = the owner's identity to refresh its beat,
-- or "" (someone filing for a gone process). ARGV[8] = the namespace prefix, ARGV[9] =
-- now: a job of a workflow filed in dead settles its result, chain and group here too
-- (_workflow.lua; absent: not looked at). Refused (FENCED) if the owner was declared
-- dead: its list was requeued, and the job will run again elsewhere.
-- A no-op (0) if the job is no longer in progress: someone requeued it, and filing it
-- too would make two copies.
local refused = fenced(KEYS[4])
if refused then return refused end
beat(KEYS[5], ARGV[7])
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[3])
if ARGV[4] == "dead" then
  if ARGV[8] and ARGV[8] ~= "" then
    wf_dead(ARGV[8], ARGV[3], ARGV[9], {})
    local bid, jid = batch_of(ARGV[3])
    if bid then batch_settle(ARGV[8], bid, jid, "dead", ARGV[9], {}) end
  end
  redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
  redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -(tonumber(ARGV[6]) + 1))
end
return 1
