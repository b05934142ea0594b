--! include _fence
--! include _wake
--! include _workflow
--! include _batch
-- A job of a workflow (results kept, a chain's step, a group's member) succeeded: its ack
-- and everything that follows from it, in one step (docs/architecture.md#workflows).
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = orphans: the job's orphan counter
-- KEYS[3] = fence: the list owner's fence
-- KEYS[4] = last_beat: the last_beat hash
-- KEYS[5] = result: the job's kept result (result:{jid})
-- KEYS[6] = result_wait: its waiters' wake token
-- KEYS[7] = next_queue_key: the queue of the chain's next step (unused when none)
-- KEYS[8] = queues: the known-queues set
-- KEYS[9] = wake: the wake stream
-- KEYS[10] = group: the group's record (unused when none)
-- KEYS[11] = group_wait: its waiters' wake token
-- KEYS[12] = batch_key: the batch's record (unused when none)
-- KEYS[13] = batch_jobs: the batch's jobs
-- KEYS[14] = results_index: the kept results' index (retained:results)
-- KEYS[15] = batch_callbacks: the batch callbacks pushed, ever (a counter)
-- KEYS[16..] = chain_mark: its chain's cancel mark (cancelled:<chain id>) when the job
-- is a chain's step with a next one (else none): while it exists the next step is not
-- pushed
-- KEYS[..] = declared(key): the keys named by data (_declared.lua), last: a callback's queue
-- and unique lock, read from its group's or batch's record, when this job's settlement
-- fires it (asked for by a {0, "need", name...} reply: the caller declares them, calls again)
-- ARGV[1] = job: the job as fetched
-- ARGV[2] = identity: the owner's identity to refresh its beat, or "" (its master
-- settling for a dead child)
-- ARGV[3] = jid: the job's id
-- ARGV[4] = value: the return value (JSON)
-- ARGV[5] = ttl: result TTL ("": not kept)
-- ARGV[6] = now: epoch s
-- ARGV[7] = group_id: group id or ""
-- ARGV[8] = member: index in the group
-- ARGV[9] = next_payload: the chain's next step (payload) or ""
-- ARGV[10] = next_queue: its queue name
-- ARGV[11] = batch_id: its batch's id or ""
-- ARGV[12] = keep: the most results kept (status_max)
-- ARGV[13..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Only if the job is still listed (else {0}: already settled, so a replay, or requeued
-- elsewhere): the writes, then the LREM. Refused (FENCED) if the owner was declared dead.
-- Returns {1 or 0, errors...} (keys of the wrong type, an expired group: logged), or
-- {0, "need", name...}, nothing written, when a callback it fires has keys not declared.
local refused = fenced(KEYS[3])
if refused then return refused end
local listed = redis.call("LPOS", KEYS[1], ARGV[1])
local n_declared = declare(13)
wf_results_index, wf_queues, wf_wake, batch_callbacks_key = KEYS[14], KEYS[8], KEYS[9], KEYS[15]
if listed then
  if ARGV[7] ~= "" then wf_member_needs(KEYS[10], ARGV[8]) end
  if ARGV[11] ~= "" then batch_settle_needs_at(KEYS[12], KEYS[13], ARGV[3], "succeeded") end
  if ARGV[5] ~= "" then table.insert(wf_result_adds, KEYS[5]) end
  wf_retain_needs(ARGV[12])
  local need = needs_reply()
  if need then return need end
end
beat(KEYS[4], ARGV[2])
if not listed then
  return {0}
end
local chain_mark = (#KEYS - n_declared >= 16) and KEYS[16] or nil
local errs = {}
local now = ARGV[6]
wf_keep = ARGV[12]
if ARGV[5] ~= "" then
  wf_result_at(KEYS[5], KEYS[6], KEYS[14], {"status", "succeeded", "value", ARGV[4], "jid", ARGV[3], "finished_at", now},
               ARGV[5], now, errs)
end
if ARGV[9] ~= "" and not (chain_mark and redis.call("EXISTS", chain_mark) == 1) then
  wf_push_at(KEYS[7], KEYS[8], KEYS[9], ARGV[10], ARGV[9], errs)
end
if ARGV[7] ~= "" then wf_member_at(KEYS[10], KEYS[11], ARGV[7], ARGV[8], ARGV[4], now, errs, ARGV[3]) end
if ARGV[11] ~= "" then batch_settle_at(KEYS[12], KEYS[13], ARGV[11], ARGV[3], "succeeded", now, errs) end
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[2])
local reply = {1}
for _, e in ipairs(errs) do table.insert(reply, e) end
return reply
