--! include _wake
--! include _dead
-- A job already in dead whose workflow and batch weren't told: a repeat orphan that
-- requeue.lua had to file raw (its parking list unusable), completed by the caller
-- (recovery.complete_raw_burials). As file.lua does for the job it files in dead: its
-- result, chain and group (_workflow.lua), its batch's count (_batch.lua; once per jid).
-- KEYS[1] = queues: the known-queues set (a callback pushed)
-- KEYS[2] = wake: the wake stream
-- KEYS[3] = results_index: the kept results' index (retained:results)
-- KEYS[4] = batch_callbacks: the batch callbacks pushed, ever (a counter)
-- KEYS[5..] = declared(key): the keys named by data (_declared.lua, as file.lua's)
-- ARGV[1] = entry: the dead entry
-- ARGV[2] = now: epoch s
-- ARGV[3] = keep: the most results kept (status_max)
-- ARGV[4..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Returns the errors (logged), or {0, "need", name...}, nothing written: keys to declare.
declare(4)
dead_keys(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
local need = dead_needs(ARGV[1], ARGV[3])
if need then return need end
local errs = {}
dead_settle(ARGV[1], ARGV[2], ARGV[3], errs)
return errs
