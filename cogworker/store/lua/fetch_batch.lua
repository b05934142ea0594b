--! include _fence
--! include _queues
--! include _take_batch
-- A look-ahead fetch of up to k jobs in one round trip, with every due ack riding on it
-- (docs/architecture.md#batch), each queue in order until it runs dry (_take_batch.lua).
-- Sent when the lease has run out; while it holds, the batch is plain commands in a MULTI
-- and fetch_batch_moved.lua, so that no payload enters Lua.
-- KEYS[1] = in-progress list, KEYS[2] = this identity's fence, KEYS[3] = last_beat,
-- KEYS[4..3+m] = the orphan counters of the m acks, KEYS[4+m..] = queues in order.
-- ARGV[1] = m, ARGV[2] = k, ARGV[3] = the look-ahead records, ARGV[4] = this identity,
-- ARGV[5] = the fetch's number, ARGV[6] = the identity whose beat is refreshed (or ""),
-- ARGV[7] = the paused set, ARGV[8] = the queue key prefix, ARGV[9..8+m] = the acks,
-- ARGV[9+m] = since (fetch.lua's ARGV[9]; absent = "").
-- Refused (FENCED) before anything, the acks included, if the identity was declared dead.
-- Returns {queue indexes, jobs, unreadable queues with Redis's error, the wake ID the
-- worker learns empty queues at or "", the paused names, 1 if stale (nothing taken) else
-- 0}; records "<number>:<n>:0" in the look-ahead records when it took n jobs (else
-- deletes the record).
local refused = fenced(KEYS[2])
if refused then return refused end
beat(KEYS[3], ARGV[6])
local m = tonumber(ARGV[1])
for i = 1, m do
  -- "-1", a string: a Lua number would be formatted (printf %.14g) on every call
  redis.call("LREM", KEYS[1], "-1", ARGV[8 + i])  -- an acked job is near the tail
end
-- Their orphan counters in one command: a call from Lua costs more than the key's delete.
if m > 0 then redis.pcall("DEL", unpack(KEYS, 4, 3 + m)) end
local since = ARGV[9 + m] or ""
local newest, stale = wake_moved(since, ARGV[8])
if stale then
  redis.call("HDEL", ARGV[3], ARGV[4])
  return {{}, {}, {}, newest, {}, 1}
end
local paused, names = paused_keys(ARGV[7], ARGV[8], since)
local first = 4 + m
local k = tonumber(ARGV[2])
local indexes, jobs, bad = {}, {}, {}
local at = take_batch(KEYS[1], first, k, paused, bad, indexes, jobs)
for j = 1, #indexes do indexes[j] = indexes[j] - first + 1 end
if #jobs > 0 then
  redis.call("HSET", ARGV[3], ARGV[4], ARGV[5] .. ":" .. #jobs .. ":0")
else
  redis.call("HDEL", ARGV[3], ARGV[4])
end
-- Every queue before the last job's was empty (all of them when fewer than k came).
newest = learned_at(since, newest, ARGV[8], at ~= first or #jobs < k)
return {indexes, jobs, bad, newest, names, 0}
