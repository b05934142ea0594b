-- Compare-and-delete of several locks in one call, each only by its owner (release_lock.lua's
-- rule): the unique locks of the jobs whose acks ride on one look-ahead fetch
-- (docs/architecture.md#riders).
-- KEYS[1..n] = locks: n locks
-- ARGV[1..n] = owners: their owners, in the same order
-- Returns how many it deleted.
local deleted = 0
for i, lock in ipairs(KEYS) do
  if redis.call("GET", lock) == ARGV[i] then
    deleted = deleted + redis.call("DEL", lock)
  end
end
return deleted
