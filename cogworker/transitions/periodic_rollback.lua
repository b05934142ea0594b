-- Undoes a claim whose push failed (or whose reply was lost), so the slot isn't lost.
-- KEYS[1] = last_slot: the entry's last slot
-- KEYS[2] = lock: the slot's lock
-- KEYS[3] = running: the running lock
-- KEYS[4] = pushed: the slot's pushed mark
-- ARGV[1] = slot: epoch s
-- ARGV[2] = jid: the jid the claim was made under
-- Returns 1, or 0 if that claim's push had landed after all (a client middleware raised
-- after it, say): nothing is undone, and the ticker's reclaim then finds the mark.
-- Only a claim this jid made is undone (the lock says so): a claim lost on the wire may
-- never have been applied, and another master's win must stand. last_slot goes back only
-- if it still is this slot (a later slot may have been claimed since); with no previous
-- value it becomes slot - 1, which still lets this slot fire, where deleting it would make
-- a catch-up-off ticker re-prime it to this very slot.
if redis.pcall("GET", KEYS[4]) == ARGV[2] then
  return 0
end
local lock = redis.call("GET", KEYS[2])
if lock then
  local owner, previous = string.match(lock, "^([^:]*):(.*)$")
  if owner == ARGV[2] then
    if redis.call("GET", KEYS[1]) == ARGV[1] then
      if previous == "" then
        redis.call("SET", KEYS[1], tostring(tonumber(ARGV[1]) - 1))
      else
        redis.call("SET", KEYS[1], previous)
      end
    end
    redis.call("DEL", KEYS[2])
  end
end
-- In the same step, so an outage can't leave the entry locked after the rollback; pcall:
-- a running lock of the wrong type mustn't make an applied rollback count as failed.
if redis.pcall("GET", KEYS[3]) == ARGV[2] then
  redis.pcall("DEL", KEYS[3])
end
return 1
