-- KEYS[1] = a lock, ARGV[1] = its owner, ARGV[2] = new TTL (s). Only the owner extends it.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("EXPIRE", KEYS[1], ARGV[2])
end
return 0
