-- The owner of a look-ahead job claims it before starting it, when a sibling (or the
-- master) may have tried to take or return it and the answer is unknown.
-- KEYS[1] = the look-ahead records; ARGV[1] = the owner's identity, ARGV[2] = the
-- number of its look-ahead fetch. take_ahead.lua and return_ahead.lua remove the same
-- record before moving the job, so exactly one of them and this claim wins.
-- Returns 1: still the owner's (the record is gone, nobody can take it now); 0: not.
if redis.call("HGET", KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call("HDEL", KEYS[1], ARGV[1])
  return 1
end
return 0
