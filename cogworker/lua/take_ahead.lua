-- A child whose queues are empty takes a sibling's look-ahead job, one the sibling
-- fetched while running another and has not started.
-- KEYS[1] = the look-ahead records, KEYS[2] = the sibling's in-progress list, KEYS[3] =
-- ours. ARGV[1] = the sibling's identity, ARGV[2] = the number of its look-ahead fetch.
-- The caller holds the sibling's lock, so the sibling can't start the job meanwhile. The
-- record must name that very fetch: an older one's job may be running already. Removing
-- it decides ownership: the sibling's claim (claim_ahead.lua) then finds it gone. A fetch
-- pushes its job at the head of the list and the sibling fetches nothing more until it
-- claims that job, so the head is the job.
-- Returns the job, or false.
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return false
end
redis.call("HDEL", KEYS[1], ARGV[1])
return redis.call("LMOVE", KEYS[2], KEYS[3], "LEFT", "LEFT")
