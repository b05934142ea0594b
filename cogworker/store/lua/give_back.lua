--! include _wake
--! include _requeue_job
--! include _fence
-- KEYS[1] = an in-progress list, KEYS[2] = its owner's fence; ARGV[1] = one job on it,
-- ARGV[2] = queue key prefix, ARGV[3] = default queue, ARGV[4] = unique lock prefix.
-- Refused (FENCED) if the owner was declared dead (its list is someone else's to requeue).
-- That job, if still on the list, back on its queue: written first, removed second, so a
-- script stopped half-way duplicates at worst and never loses.
local refused = fenced(KEYS[2])
if refused then return refused end
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
requeue_job(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
