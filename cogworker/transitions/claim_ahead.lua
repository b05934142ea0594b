--! include _fence
--! include _ahead
-- The owner of look-ahead jobs claims what is left of them, when a sibling (or the
-- master) may have tried to take or return them and the answer is unknown.
-- KEYS[1] = ahead: the look-ahead records
-- KEYS[2] = fence: the owner's fence
-- ARGV[1] = owner: the owner's identity
-- ARGV[2] = number: the number of its look-ahead fetch
-- ARGV[3] = started: how many of that fetch's jobs it started ("" = 0)
-- Refused (FENCED) if the owner was declared dead: its
-- list, those jobs included, was requeued. take_ahead.lua and return_ahead.lua count or
-- remove the same record before moving a job, so each job goes to exactly one of them.
-- Returns how many of the fetch's jobs not yet started are still the owner's (the oldest
-- ones; the record is gone, nobody can take them now); 0: none.
local refused = fenced(KEYS[2])
if refused then return refused end
local number, n, t = ahead_record(KEYS[1], ARGV[1])
if number ~= ARGV[2] then return 0 end
redis.call("HDEL", KEYS[1], ARGV[1])
local left = n - t - (tonumber(ARGV[3]) or 0)
if left < 0 then return 0 end
return left
