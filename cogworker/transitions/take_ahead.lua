--! include _fence
--! include _ahead
-- A child whose queues are empty takes one of a sibling's look-ahead jobs, one the
-- sibling fetched while running another and has not started.
-- KEYS[1] = ahead: the look-ahead records
-- KEYS[2] = sibling_list: the sibling's in-progress list
-- KEYS[3] = in_progress: ours
-- KEYS[4] = fence: our fence
-- KEYS[5] = sibling_fence: the sibling's fence
-- ARGV[1] = sibling: the sibling's identity
-- ARGV[2] = number: the number of its look-ahead fetch
-- ARGV[3] = started: how many of that fetch's jobs the sibling started (its slot says;
-- "" = 0)
-- Refused (FENCED) if we were declared dead; nothing to take if the sibling was (its list,
-- those jobs included, was requeued).
-- The caller holds the sibling's lock, so the sibling can't start a job meanwhile. The
-- record must name that very fetch: an older one's job may be running already. The
-- sibling starts its jobs oldest first, and fetches nothing more until it started (or
-- claimed) the last of them, so its list's head is a job not started while any is left.
-- Counting the take in the record decides ownership: the sibling's claim
-- (claim_ahead.lua) then leaves that job out.
-- Returns the job, or false.
local refused = fenced(KEYS[4])
if refused then return refused end
if redis.call("EXISTS", KEYS[5]) == 1 then return false end
local number, n, t = ahead_record(KEYS[1], ARGV[1])
if number ~= ARGV[2] then return false end
local left = n - t - (tonumber(ARGV[3]) or 0)
if left < 1 then return false end
if left == 1 then
  redis.call("HDEL", KEYS[1], ARGV[1])
else
  redis.call("HSET", KEYS[1], ARGV[1], number .. ":" .. n .. ":" .. (t + 1))
end
return redis.call("LMOVE", KEYS[2], KEYS[3], "LEFT", "LEFT")
