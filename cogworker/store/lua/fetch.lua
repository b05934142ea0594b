--! include _fence
--! include _queues
-- Reliable fetch, with the previous job's ack riding along (one round trip per job).
-- KEYS[1] = in-progress list, KEYS[2] = orphan counter of the job being acked (or any
-- unused key of the namespace when there is none), KEYS[3] = this identity's fence,
-- KEYS[4] = last_beat, KEYS[5..] = queues in the order to try.
-- ARGV[1] = the previous job to acknowledge, or "". ARGV[2] = the wake stream, or "":
-- a worker of several queues blocks on it when nothing is waiting, from the ID returned
-- here, so a push landing between this script and that block still wakes it.
-- ARGV[3..5] = for a look-ahead fetch (sent while the previous job runs): the hash of
-- look-ahead records, this identity and the fetch's number. The record says that fetch
-- took a job, so a sibling that runs dry may take that job before it starts ("" when none).
-- ARGV[6] = this identity: its beat is refreshed here. Refused (FENCED) before anything,
-- the ack included, if the identity was declared dead.
-- ARGV[7] = the set of paused queue names, ARGV[8] = the queue key prefix: a paused
-- queue is skipped, fleet-wide, from the moment the operator's SADD lands (read here,
-- in the same step as the move, so no job of it is taken afterwards).
-- ARGV[9] = since, for a worker keeping known-empty queues (_queues.lua; absent = "").
-- Returns {index of the queue, 0 if none had a job, -1 if stale (nothing taken); job or "";
-- last wake ID to block from, or ""; the wake ID the worker learns empty queues at, or "";
-- the paused names (when since is not "")}, then for each queue key that could not be
-- moved from, its name and Redis's error, so the caller can tell a key of the wrong type
-- (logged; one bad key never stops the other queues) from Redis refusing writes (OOM,
-- READONLY: an outage).
local refused = fenced(KEYS[3])
if refused then return refused end
beat(KEYS[4], ARGV[6])
if ARGV[1] ~= "" then
  redis.call("LREM", KEYS[1], 1, ARGV[1])
  redis.pcall("DEL", KEYS[2])
end
local since = ARGV[9] or ""
local newest, stale = wake_moved(since, ARGV[8])
if stale then return stale_reply(ARGV[3], ARGV[4], newest) end
local paused, names = paused_keys(ARGV[7], ARGV[8], since)
local bad = {}
local reply
local at, job = take_first(KEYS[1], 5, paused, bad)
newest = learned_at(since, newest, ARGV[8], at ~= 5)
if at then
  reply = {at - 4, job, "", newest, names}
  if ARGV[3] and ARGV[3] ~= "" then redis.call("HSET", ARGV[3], ARGV[4], ARGV[5]) end
else
  reply = {0, "", went_dry(ARGV[3], ARGV[4], ARGV[2], newest), newest, names}
end
for _, item in ipairs(bad) do table.insert(reply, item) end
return reply
