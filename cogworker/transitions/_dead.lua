--! include _workflow
--! include _batch
-- Shared by the scripts that file a job in dead away from its last end (file.lua,
-- file_head.lua, settle_dead.lua): its workflow and batch hear of it there as they would
-- have at its end (its result, chain and group: _workflow.lua; its batch's count and
-- callbacks: _batch.lua).

-- The fixed keys a settlement may write: the known-queues set and the wake stream (a
-- callback pushed), the kept results' index, the batch callbacks counter.
local function dead_keys(queues, wake_key, results_index, callbacks)
  wf_queues, wf_wake, wf_results_index, batch_callbacks_key = queues, wake_key, results_index, callbacks
end

-- Nil when every key named by data that settling ``entry`` writes was declared; else the
-- {0, "need", name...} reply, to be returned before anything is written.
local function dead_needs(entry, keep)
  wf_dead_needs(entry)
  local bid, jid = batch_of(entry)
  if bid then batch_settle_needs(bid, jid, "dead") end
  wf_retain_needs(keep)
  return needs_reply()
end

local function dead_settle(entry, now, keep, errs)
  wf_keep = keep
  wf_dead(entry, now, errs)
  local bid, jid = batch_of(entry)
  if bid then batch_settle(bid, jid, "dead", now, errs) end
end
