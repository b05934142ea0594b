-- Claims one slot of a periodic entry for the whole fleet: exactly one caller wins it.
-- KEYS[1] = last_slot: the entry's last slot
-- KEYS[2] = lock: the slot's lock
-- KEYS[3] = running: the running lock
-- KEYS[4] = disabled: the disabled set
-- KEYS[5] = pushed: the slot's pushed mark (periodic_push.lua)
-- ARGV[1] = slot: epoch s
-- ARGV[2] = mode: "claim"; "prime" (catch-up off, this process's first look: never
-- fire, only set a missing last_slot); "prime_new" (catch-up off: as "claim"); every
-- mode but "reclaim" sets a missing last_slot instead of firing; "skip" (catch-up off,
-- a slot that passed while this process couldn't fire it: spent without firing);
-- "reclaim" (a claim of this slot whose outcome the caller doesn't know, tried again)
-- ARGV[3] = lock_ttl: the slot lock's TTL (s)
-- ARGV[4] = jid: the jid it is claimed under
-- ARGV[5] = unique: "1" for a unique entry
-- ARGV[6] = running_ttl: the running lock's TTL (s)
-- ARGV[7] = pjid: the entry's id
-- ARGV[8..] = reclaim: "reclaim" only: "1" if an earlier claim is known to have been
-- made (its push failed, and it was rolled back or may have been), then the jids it
-- was tried under. A lock held by one of them is the caller's own claim: taken over
-- under ARGV[4]. No lock: after a known claim, claimed again as usual; otherwise the
-- claim never landed, and the slot is not claimed here. A pushed mark naming one of
-- them means that claim's push landed (its reply was lost): nothing is taken over or
-- pushed.
-- Returns {status, detail, disabled set unreadable (0/1)}; status 0 = not ours (already
-- claimed or primed), 1 = claimed (detail = the previous last_slot, "" if none),
-- 2 = primed, 3 = skipped: the previous run still holds the running lock (detail = its
-- jid), 4 = skipped: disabled, 5 = skipped: missed (detail = the previous last_slot),
-- 6 = reclaim: pushed already (detail = the jid it was pushed under).
-- The slot lock holds "<jid>:<previous last_slot>", so a rollback can tell its own claim
-- (and what to restore) even when the claim's reply was lost.
local slot = tonumber(ARGV[1])
local mode = ARGV[2]
local raw = redis.call("GET", KEYS[1])
local last = raw and tonumber(raw)
if mode == "reclaim" then
  -- pcall: a mark of the wrong type (not ours: a SET replaces any type) counts as none.
  local pushed = redis.pcall("GET", KEYS[5])
  for i = 9, #ARGV do
    if pushed == ARGV[i] then
      return {6, pushed, 0}
    end
  end
  local lock = redis.call("GET", KEYS[2])
  if lock then
    local owner, previous = string.match(lock, "^([^:]*):(.*)$")
    for i = 9, #ARGV do
      if owner == ARGV[i] then
        redis.call("SET", KEYS[2], ARGV[4] .. ":" .. previous, "EX", ARGV[3])
        if ARGV[5] == "1" then
          local holder = redis.call("GET", KEYS[3])
          if not holder or holder == owner then
            redis.call("SET", KEYS[3], ARGV[4], "EX", ARGV[6])
          end
        end
        return {1, previous, 0}
      end
    end
    return {0, "", 0}
  end
  if ARGV[8] ~= "1" then
    return {0, "", 0}
  end
elseif not last then
  -- A new entry (no slot of it ever recorded): its first slot is recorded, not fired,
  -- whatever the mode. Catch-up is for slots missed while the entry existed; deploying a
  -- nightly job must not run it on deploy.
  redis.call("SET", KEYS[1], ARGV[1])
  return {2, "", 0}
end
if mode == "prime" then
  return {0, "", 0}
end
if last and last >= slot then
  return {0, "", 0}
end
-- A lock without last_slot at this slot: someone claimed it and last_slot was lost since.
if redis.call("EXISTS", KEYS[2]) == 1 then
  return {0, "", 0}
end
if mode == "skip" then
  redis.call("SET", KEYS[1], ARGV[1])
  return {5, raw or "", 0}
end
-- Unreadable (wrong type) counts as enabled: losing a Disable is the lesser evil than
-- stopping the entry; the caller logs it.
local unreadable = 0
local disabled = redis.pcall("SISMEMBER", KEYS[4], ARGV[7])
if type(disabled) == "table" then
  unreadable = 1
elseif disabled == 1 then
  -- Consumed: a slot passed while disabled doesn't fire on enable.
  redis.call("SET", KEYS[1], ARGV[1])
  return {4, "", 0}
end
if ARGV[5] == "1" then
  local holder = redis.call("GET", KEYS[3])
  if holder then
    redis.call("SET", KEYS[1], ARGV[1])
    return {3, holder, unreadable}
  end
end
-- SET never fails on a key's type, so no write below can stop the script half-way.
redis.call("SET", KEYS[2], ARGV[4] .. ":" .. (last and raw or ""), "EX", ARGV[3])
redis.call("SET", KEYS[1], ARGV[1])
if ARGV[5] == "1" then
  redis.call("SET", KEYS[3], ARGV[4], "EX", ARGV[6])
end
return {1, last and raw or "", unreadable}
