--! include _fence
--! include _checkpoint
-- KEYS[1] = the job's checkpoint, KEYS[2] = this identity's fence, KEYS[3] = last_beat;
-- ARGV[1] = items done, ARGV[2] = cursor (JSON), ARGV[3] = TTL, ARGV[4] = identity,
-- ARGV[5] = now, ARGV[6] = state (running, failed, stopped, finished).
-- Refused (FENCED) if the identity was declared dead: its job runs elsewhere now, and
-- that run's checkpoints are the ones that count.
local refused = fenced(KEYS[2])
if refused then return refused end
beat(KEYS[3], ARGV[4])
return save_checkpoint(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
