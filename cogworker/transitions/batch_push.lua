--! include _wake
-- Jobs joining a batch (docs/architecture.md#batches): each is counted (pending) and
-- written in one step, so a batch never counts a job that isn't there, nor runs one it
-- doesn't count. A unique job (one at a time) takes its lock first, as unique_push.lua: a
-- duplicate writes nothing and joins nothing.
-- KEYS[1] = record: the batch's record
-- KEYS[2] = jobs: its jobs
-- KEYS[3] = target: the queue (or schedule)
-- KEYS[4] = queues: the known-queues set
-- KEYS[5] = wake: the wake stream
-- KEYS[6] = lock: the unique lock (or KEYS[1], unused)
-- ARGV[1] = at: run-at epoch for the schedule, or ""
-- ARGV[2] = queue: the queue's name
-- ARGV[3] = lock_ttl: the unique lock's TTL (s), or "" (not unique)
-- ARGV[4..] = pairs: jid, payload, jid, payload... (in order: the first is nearest the
-- fetch end, as a bulk LPUSH leaves them)
-- Returns 1 (written), 0 (a duplicate of a unique job), -1 (no such batch: expired, or
-- never opened), -2 (the batch is done: its callbacks may have fired).
if redis.call("EXISTS", KEYS[1]) == 0 then return -1 end
if redis.call("HEXISTS", KEYS[1], "done_at") == 1 then return -2 end
if ARGV[3] ~= "" and not redis.call("SET", KEYS[6], ARGV[4], "NX", "EX", ARGV[3]) then
  return 0
end
local added = 0
for i = 4, #ARGV, 2 do
  if ARGV[1] ~= "" then
    redis.call("ZADD", KEYS[3], ARGV[1], ARGV[i + 1])
  else
    local n = redis.call("LPUSH", KEYS[3], ARGV[i + 1])
    if n == 1 then wake(KEYS[5]) end
  end
  if redis.call("HSETNX", KEYS[2], ARGV[i], "pending") == 1 then added = added + 1 end
end
if ARGV[1] == "" then redis.pcall("SADD", KEYS[4], ARGV[2]) end
redis.call("HINCRBY", KEYS[1], "total", added)
redis.call("HINCRBY", KEYS[1], "pending", added)
local ttl = redis.call("TTL", KEYS[1])
if ttl > 0 then redis.call("EXPIRE", KEYS[2], ttl) end
return 1
