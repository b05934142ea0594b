--! include _wake
-- An operator's move of one entry of schedule/retry/dead, checked in the same step: the
-- entry must still be in the sorted set it was read from (a poller or another operator
-- may have moved it since). Write first, remove second.
-- KEYS[1] = zset: the sorted set
-- KEYS[2] = dest: a queue (mode "retry") or dead (mode "kill"), unused for "delete"
-- KEYS[3] = queues: the known-queues set
-- KEYS[4] = wake: the wake stream
-- ARGV[1] = mode: "retry", "kill" or "delete"
-- ARGV[2] = entry: the entry (exact bytes)
-- ARGV[3] = arg: the queue's name (retry) or the dead score (kill)
-- Returns 1 if moved (or deleted), 0 if the entry was no longer there.
if not redis.call("ZSCORE", KEYS[1], ARGV[2]) then return 0 end
local mode = ARGV[1]
if mode == "retry" then
  redis.call("LPUSH", KEYS[2], ARGV[2])
  redis.pcall("SADD", KEYS[3], ARGV[3])
  wake(KEYS[4])
elseif mode == "kill" then
  redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
elseif mode ~= "delete" then
  return redis.error_reply("unknown mode " .. mode)
end
redis.call("ZREM", KEYS[1], ARGV[2])
return 1
