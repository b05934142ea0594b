--! include _fence
--! include _queues
--! include _take_many
-- A look-ahead fetch of up to k jobs in one round trip, with every due ack riding on it
-- (docs/architecture.md#lookahead-k), each queue in order until it runs dry (_take_many.lua).
-- Sent when the lease has run out; while it holds, the look-ahead is plain commands in a MULTI
-- and fetch_ahead_moved.lua, so that no payload enters Lua.
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = fence: this identity's fence
-- KEYS[3] = last_beat: the last_beat hash
-- KEYS[4] = wake: the wake stream (known-empty queues are checked against it)
-- KEYS[5] = paused: the paused set
-- KEYS[6] = ahead: the look-ahead records
-- KEYS[7..6+m] = orphans: the orphan counters of the m acks
-- KEYS[7+m..] = queues: the queues in order
-- ARGV[1] = m (derived): how many acks
-- ARGV[2] = k: how many jobs to take
-- ARGV[3] = owner: this identity, for the record
-- ARGV[4] = number: the fetch's number
-- ARGV[5] = identity: the identity whose beat is refreshed (or "")
-- ARGV[6] = queue_prefix: the queue key prefix (paused names matched, as in fetch.lua)
-- ARGV[7..6+m] = acks: the acks
-- ARGV[7+m] = since: fetch.lua's since (absent = "")
-- Refused (FENCED) before anything, the acks included, if the identity was declared dead.
-- Returns {queue indexes, jobs, unreadable queues with Redis's error, the wake ID the
-- worker learns empty queues at or "", the paused names, 1 if stale (nothing taken) else
-- 0}; records "<number>:<n>:0" in the look-ahead records when it took n jobs (else
-- deletes the record).
local refused = fenced(KEYS[2])
if refused then return refused end
beat(KEYS[3], ARGV[5])
local m = tonumber(ARGV[1])
for i = 1, m do
  -- "-1", a string: a Lua number would be formatted (printf %.14g) on every call
  redis.call("LREM", KEYS[1], "-1", ARGV[6 + i])  -- an acked job is near the tail
end
-- Their orphan counters in one command: a call from Lua costs more than the key's delete.
if m > 0 then redis.pcall("DEL", unpack(KEYS, 7, 6 + m)) end
local since = ARGV[7 + m] or ""
local newest, stale = wake_moved(since, KEYS[4])
if stale then
  redis.call("HDEL", KEYS[6], ARGV[3])
  return {{}, {}, {}, newest, {}, 1}
end
local first = 7 + m
local paused, names = paused_keys(KEYS[5], ARGV[6], since, first)
local k = tonumber(ARGV[2])
local indexes, jobs, bad = {}, {}, {}
local at = take_many(KEYS[1], first, k, paused, bad, indexes, jobs)
for j = 1, #indexes do indexes[j] = indexes[j] - first + 1 end
if #jobs > 0 then
  redis.call("HSET", KEYS[6], ARGV[3], ARGV[4] .. ":" .. #jobs .. ":0")
else
  redis.call("HDEL", KEYS[6], ARGV[3])
end
-- Every queue before the last job's was empty (all of them when fewer than k came).
newest = learned_at(since, newest, KEYS[4], at ~= first or #jobs < k)
return {indexes, jobs, bad, newest, names, 0}
