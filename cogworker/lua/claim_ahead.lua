--! include _fence
-- The owner of a look-ahead job claims it before starting it, when a sibling (or the
-- master) may have tried to take or return it and the answer is unknown.
-- KEYS[1] = the look-ahead records, KEYS[2] = the owner's fence; ARGV[1] = the owner's
-- identity, ARGV[2] = the number of its look-ahead fetch. Refused (FENCED) if the owner
-- was declared dead: its list, that job included, was requeued. take_ahead.lua and return_ahead.lua remove the same
-- record before moving the job, so exactly one of them and this claim wins.
-- Returns 1: still the owner's (the record is gone, nobody can take it now); 0: not.
local refused = fenced(KEYS[2])
if refused then return refused end
if redis.call("HGET", KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call("HDEL", KEYS[1], ARGV[1])
  return 1
end
return 0
