--! include _fence
--! include _checkpoint
--! include _declared
-- KEYS[1] = checkpoint: the job's checkpoint
-- KEYS[2] = fence: this identity's fence
-- KEYS[3] = last_beat: the last_beat hash
-- KEYS[4] = index: the checkpoints' index (retained:checkpoints)
-- KEYS[5..] = declared(key): the checkpoints the index's trim sheds, named by the index
-- ("key:<the key>", _declared.lua)
-- ARGV[1] = done: items done
-- ARGV[2] = cursor: the cursor (JSON)
-- ARGV[3] = ttl: the checkpoint's TTL (s)
-- ARGV[4] = identity: this identity
-- ARGV[5] = now: epoch s
-- ARGV[6] = state: running, failed, stopped, finished
-- ARGV[7] = keep: the most checkpoints kept (status_max)
-- ARGV[8..] = declared(name): the declared keys' names, in their order
-- Returns 1 if written, 0 if skipped, or {0, "need", name...} (nothing written) when the trim
-- sheds keys not declared.
-- Refused (FENCED) if the identity was declared dead: its job runs elsewhere now, and
-- that run's checkpoints are the ones that count.
local refused = fenced(KEYS[2])
if refused then return refused end
declare(8)
checkpoint_needs(KEYS[1], ARGV[1], KEYS[4], ARGV[7], declared_shed)
local need = needs_reply()
if need then return need end
beat(KEYS[3], ARGV[4])
return save_checkpoint(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], KEYS[4], ARGV[7], declared_shed)
