--! include _wake
--! include _workflow
--! include _batch
-- A job already in dead whose workflow and batch weren't told: a repeat orphan that
-- requeue.lua had to file raw (its parking list unusable), completed by the caller
-- (recovery.complete_raw_burials). As file.lua does for the job it files in dead: its
-- result, chain and group (_workflow.lua), its batch's count (_batch.lua; once per jid).
-- ARGV[1] = the namespace prefix, ARGV[2] = the dead entry, ARGV[3] = now.
local errs = {}
wf_dead(ARGV[1], ARGV[2], ARGV[3], errs)
local bid, jid = batch_of(ARGV[2])
if bid then batch_settle(ARGV[1], bid, jid, "dead", ARGV[3], errs) end
return errs
