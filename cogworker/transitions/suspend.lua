--! include _wake
--! include _back
--! include _fence
--! include _checkpoint
--! include _declared
-- An iterable job stopped at a yield (a stop, quiet, recycling): its cursor saved and the
-- job back on its queue, in one step, so nothing can happen between the two.
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = fence: its owner's fence
-- KEYS[3] = checkpoint: the job's checkpoint
-- KEYS[4] = last_beat: the last_beat hash
-- KEYS[5] = index: the checkpoints' index (retained:checkpoints)
-- KEYS[6] = queue: the job's queue (the default queue when its payload names none or
-- can't be read)
-- KEYS[7] = wake: the wake stream
-- KEYS[8..] = lock: the job's unique lock when its payload names one (else none)
-- KEYS[..] = declared(key): last, the checkpoints the index's trim sheds, named by the
-- index ("key:<the key>", _declared.lua)
-- ARGV[1] = job: the job as listed
-- ARGV[2] = entry: the job to push (the same, with its cursor)
-- ARGV[3] = done: items done
-- ARGV[4] = cursor: the cursor (JSON)
-- ARGV[5] = ttl: the checkpoint's TTL
-- ARGV[6] = identity: the owner's identity
-- ARGV[7] = now: epoch s
-- ARGV[8] = keep: the most checkpoints kept (status_max)
-- ARGV[9..] = declared(name): the declared keys' names, in their order
-- Refused (FENCED) if the owner was declared dead; 0 if the job is no longer listed;
-- {0, "need", name...} (nothing written) when the trim sheds keys not declared.
-- Written first, removed second: a script stopped half-way duplicates at worst.
local refused = fenced(KEYS[2])
if refused then return refused end
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
local n_declared = declare(9)
checkpoint_needs(KEYS[3], ARGV[3], KEYS[5], ARGV[8], declared_shed)
local need = needs_reply()
if need then return need end
local lock = (#KEYS - n_declared >= 8) and KEYS[8] or nil
beat(KEYS[4], ARGV[6])
save_checkpoint(KEYS[3], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], "suspended", KEYS[5], ARGV[8], declared_shed)
requeue_into(ARGV[2], KEYS[6], KEYS[7], lock)
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
