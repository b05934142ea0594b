--! include _wake
--! include _requeue_job
--! include _fence
--! include _checkpoint
-- An iterable job stopped at a yield (a stop, quiet, recycling): its cursor saved and the
-- job back on its queue, in one step, so nothing can happen between the two.
-- KEYS[1] = in-progress list, KEYS[2] = its owner's fence, KEYS[3] = the job's checkpoint,
-- KEYS[4] = last_beat; ARGV[1] = the job as listed, ARGV[2] = the job to push (the same,
-- with its cursor), ARGV[3] = queue key prefix, ARGV[4] = default queue, ARGV[5] = unique
-- lock prefix, ARGV[6] = items done, ARGV[7] = cursor (JSON), ARGV[8] = checkpoint TTL,
-- ARGV[9] = identity, ARGV[10] = now.
-- Refused (FENCED) if the owner was declared dead; 0 if the job is no longer listed.
-- Written first, removed second: a script stopped half-way duplicates at worst.
local refused = fenced(KEYS[2])
if refused then return refused end
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
beat(KEYS[4], ARGV[9])
save_checkpoint(KEYS[3], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10], "suspended")
requeue_job(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
