--! include _fence
--! include _wake
--! include _workflow
--! include _batch
-- A job of a workflow (results kept, a chain's step, a group's member) succeeded: its ack
-- and everything that follows from it, in one step (docs/architecture.md#workflows).
-- KEYS[1] = in-progress list, KEYS[2] = the job's orphan counter, KEYS[3] = the list
-- owner's fence, KEYS[4] = last_beat.
-- ARGV[1] = the job as fetched, ARGV[2] = the owner's identity to refresh its beat, or ""
-- (its master settling for a dead child), ARGV[3] = the namespace prefix ("cogworker:"),
-- ARGV[4] = jid, ARGV[5] = the return value (JSON), ARGV[6] = result TTL ("": not kept),
-- ARGV[7] = now (epoch s), ARGV[8] = group id or "", ARGV[9] = index in the group,
-- ARGV[10] = the chain's next step (payload) or "", ARGV[11] = its queue name,
-- ARGV[12] = its batch's id or "" (absent: none).
-- Only if the job is still listed (else {0}: already settled, so a replay, or requeued
-- elsewhere): the writes, then the LREM. Refused (FENCED) if the owner was declared dead.
-- Returns {1 or 0, errors...} (keys of the wrong type, an expired group: logged).
local refused = fenced(KEYS[3])
if refused then return refused end
beat(KEYS[4], ARGV[2])
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return {0}
end
local errs = {}
local ns, now = ARGV[3], ARGV[7]
if ARGV[6] ~= "" then
  wf_result(ns, ARGV[4], {"status", "succeeded", "value", ARGV[5], "jid", ARGV[4], "finished_at", now},
            ARGV[6], now, errs)
end
if ARGV[10] ~= "" then wf_push(ns, ARGV[11], ARGV[10], errs) end
if ARGV[8] ~= "" then wf_member(ns, ARGV[8], ARGV[9], ARGV[5], now, errs, ARGV[4]) end
if ARGV[12] and ARGV[12] ~= "" then batch_settle(ns, ARGV[12], ARGV[4], "succeeded", now, errs) end
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[2])
local reply = {1}
for _, e in ipairs(errs) do table.insert(reply, e) end
return reply
