--! include _wake
--! include _back
--! include _fence
-- KEYS[1] = in_progress: an in-progress list
-- KEYS[2] = fence: its owner's fence
-- KEYS[3] = queue: the job's queue (the default queue when its payload names none or
-- can't be read)
-- KEYS[4] = wake: the wake stream
-- KEYS[5..] = lock: the job's unique lock when its payload names one (else none)
-- ARGV[1] = job: one job on it
-- Refused (FENCED) if the owner was declared dead (its list is someone else's to requeue).
-- That job, if still on the list, back on its queue: written first, removed second, so a
-- script stopped half-way duplicates at worst and never loses.
local refused = fenced(KEYS[2])
if refused then return refused end
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
requeue_into(ARGV[1], KEYS[3], KEYS[4], KEYS[5])
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
