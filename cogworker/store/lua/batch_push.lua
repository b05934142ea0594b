--! include _wake
-- A job joining a batch (docs/architecture.md#batches): it is counted (pending) and
-- written in one step, so a batch never counts a job that isn't there, nor runs one it
-- doesn't count. A unique job takes its lock first, as unique_push.lua: a duplicate
-- writes nothing and joins nothing.
-- KEYS[1] = the batch's record, KEYS[2] = its jobs, KEYS[3] = the queue (or schedule),
-- KEYS[4] = known queues, KEYS[5] = the wake stream, KEYS[6] = the unique lock (or
-- KEYS[1], unused).
-- ARGV[1] = jid, ARGV[2] = the payload, ARGV[3] = run-at epoch for the schedule or "",
-- ARGV[4] = queue name, ARGV[5] = the unique lock's TTL (s) or "" (not unique).
-- Returns 1 (written), 0 (a duplicate of a unique job), -1 (no such batch: expired, or
-- never opened), -2 (the batch is done: its callbacks may have fired).
if redis.call("EXISTS", KEYS[1]) == 0 then return -1 end
if redis.call("HEXISTS", KEYS[1], "done_at") == 1 then return -2 end
if ARGV[5] ~= "" and not redis.call("SET", KEYS[6], ARGV[1], "NX", "EX", ARGV[5]) then
  return 0
end
if ARGV[3] ~= "" then
  redis.call("ZADD", KEYS[3], ARGV[3], ARGV[2])
else
  local n = redis.call("LPUSH", KEYS[3], ARGV[2])
  redis.pcall("SADD", KEYS[4], ARGV[4])
  if n == 1 then wake(KEYS[5]) end
end
if redis.call("HSETNX", KEYS[2], ARGV[1], "pending") == 1 then
  redis.call("HINCRBY", KEYS[1], "total", 1)
  redis.call("HINCRBY", KEYS[1], "pending", 1)
end
local ttl = redis.call("TTL", KEYS[1])
if ttl > 0 then redis.call("EXPIRE", KEYS[2], ttl) end
return 1
