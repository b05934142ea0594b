-- KEYS[1] = lock: a lock
-- ARGV[1] = owner: its owner
-- ARGV[2] = ttl: the new TTL (s). Only the owner extends it.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("EXPIRE", KEYS[1], ARGV[2])
end
return 0
