-- Compare-and-delete: KEYS[1] = a lock, ARGV[1] = its owner. Only the owner deletes it.
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
