--! include _fence
--! include _queues
-- Reliable fetch, with the previous job's ack riding along (one round trip per job).
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = orphans: the orphan counter of the job being acked (or any unused key of the
-- namespace when there is none)
-- KEYS[3] = fence: this identity's fence
-- KEYS[4] = last_beat: the last_beat hash
-- KEYS[5] = wake: the wake stream: a worker of several queues blocks on it when nothing
-- is waiting, from the ID returned here, so a push landing between this script and that
-- block still wakes it; and known-empty queues are checked against it (_queues.lua)
-- KEYS[6] = paused: the set of paused queue names: a paused queue is skipped,
-- fleet-wide, from the moment the operator's SADD lands (read here, in the same step
-- as the move, so no job of it is taken afterwards)
-- KEYS[7] = ahead: the look-ahead records
-- KEYS[8..] = queues: the queues in the order to try
-- ARGV[1] = ack: the previous job to acknowledge, or ""
-- ARGV[2] = block: "1" when the worker blocks on the wake stream if nothing is waiting
-- (the ID to block from is returned), else ""
-- ARGV[3] = owner: for a look-ahead fetch (sent while the previous job runs), this
-- identity, whose record in ahead says that fetch took a job, so a sibling that runs
-- dry may take that job before it starts; "" when none
-- ARGV[4] = number: the fetch's number ("" when none)
-- ARGV[5] = identity: this identity: its beat is refreshed here. Refused (FENCED)
-- before anything, the ack included, if the identity was declared dead
-- ARGV[6] = queue_prefix: the queue key prefix (a queue key is it and the queue's name:
-- paused names are matched against the queues' keys, never built into keys)
-- ARGV[7] = since: for a worker keeping known-empty queues (_queues.lua; absent = "")
-- Returns {index of the queue, 0 if none had a job, -1 if stale (nothing taken); job or "";
-- last wake ID to block from, or ""; the wake ID the worker learns empty queues at, or "";
-- the paused names (when since is not "")}, then for each queue key that could not be
-- moved from, its name and Redis's error, so the caller can tell a key of the wrong type
-- (logged; one bad key never stops the other queues) from Redis refusing writes (OOM,
-- READONLY: an outage).
local refused = fenced(KEYS[3])
if refused then return refused end
beat(KEYS[4], ARGV[5])
if ARGV[1] ~= "" then
  redis.call("LREM", KEYS[1], 1, ARGV[1])
  redis.pcall("DEL", KEYS[2])
end
local ahead = ARGV[3] ~= "" and KEYS[7] or ""
local since = ARGV[7] or ""
local newest, stale = wake_moved(since, KEYS[5])
if stale then return stale_reply(ahead, ARGV[3], newest) end
local paused, names = paused_keys(KEYS[6], ARGV[6], since, 8)
local bad = {}
local reply
local at, job = take_first(KEYS[1], 8, paused, bad)
newest = learned_at(since, newest, KEYS[5], at ~= 8)
if at then
  reply = {at - 7, job, "", newest, names}
  if ahead ~= "" then redis.call("HSET", ahead, ARGV[3], ARGV[4]) end
else
  reply = {0, "", went_dry(ahead, ARGV[3], ARGV[2] == "1" and KEYS[5] or "", newest), newest, names}
end
for _, item in ipairs(bad) do table.insert(reply, item) end
return reply
