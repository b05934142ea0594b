-- KEYS[1] = repeat_orphans, KEYS[2] = dead; ARGV[1] = the parked job (the list's head),
-- ARGV[2] = score, ARGV[3] = its dead entry. Filed, then removed.
if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("LPOP", KEYS[1])
return 1
