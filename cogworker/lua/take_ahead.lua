--! include _fence
-- A child whose queues are empty takes a sibling's look-ahead job, one the sibling
-- fetched while running another and has not started.
-- KEYS[1] = the look-ahead records, KEYS[2] = the sibling's in-progress list, KEYS[3] =
-- ours, KEYS[4] = our fence, KEYS[5] = the sibling's fence. ARGV[1] = the sibling's
-- identity, ARGV[2] = the number of its look-ahead fetch.
-- Refused (FENCED) if we were declared dead; nothing to take if the sibling was (its list,
-- that job included, was requeued).
-- The caller holds the sibling's lock, so the sibling can't start the job meanwhile. The
-- record must name that very fetch: an older one's job may be running already. Removing
-- it decides ownership: the sibling's claim (claim_ahead.lua) then finds it gone. A fetch
-- pushes its job at the head of the list and the sibling fetches nothing more until it
-- claims that job, so the head is the job.
-- Returns the job, or false.
local refused = fenced(KEYS[4])
if refused then return refused end
if redis.call("EXISTS", KEYS[5]) == 1 or redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return false
end
redis.call("HDEL", KEYS[1], ARGV[1])
return redis.call("LMOVE", KEYS[2], KEYS[3], "LEFT", "LEFT")
