-- Compare-and-delete: only the owner deletes it.
-- KEYS[1] = lock: a lock
-- ARGV[1] = owner: its owner
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
