--! include _fence
--! include _queues
--! include _take_batch
-- The batch fetch while the lease holds (docs/architecture.md#batch): this script runs
-- last in one MULTI after
--   LREM <list> -1 <ack>   (one per ack riding; then one DEL of their orphan counters)
--   LPUSH <list> <mark>                       (this fetch's: MARK:<number>)
--   RPOPLPUSH <guessed queue> <list>          (k of them: LMOVE RIGHT LEFT)
-- so that no payload enters Lua (fetch_moved.lua's way, for k jobs). Where it finds the
-- mark says how many they moved (those above it). It checks everything
-- fetch_batch.lua checks and moves them back, in order, when they must not stand; it
-- takes what is still missing as fetch_batch.lua does (only then do payloads enter Lua).
-- KEYS[1] = in-progress list, KEYS[2] = this identity's fence, KEYS[3] = last_beat,
-- KEYS[4..] = queues in order.
-- ARGV[1] = k, ARGV[2] = the look-ahead records, ARGV[3] = this identity, ARGV[4] = the
-- fetch's number, ARGV[5] = the identity whose beat is refreshed (or ""), ARGV[6] = the
-- paused set, ARGV[7] = the queue key prefix, ARGV[8] = the mark, ARGV[9] = the guessed
-- queue's index in KEYS, ARGV[10] = since (fetch.lua's ARGV[9]; absent = "").
-- Returns {n, queue indexes, jobs, unreadable queues with Redis's error, the wake ID the
-- worker learns empty queues at or "", the paused names, 1 if stale else 0}: the first n
-- moves' replies are jobs that stand (from the guessed queue), then those it took itself,
-- newer; records "<number>:<total>:0" in the look-ahead records (or deletes the record).
local list = KEYS[1]
local k = tonumber(ARGV[1])
local guess = tonumber(ARGV[9])
-- The mark is this fetch's own (its number in it): looked for from the tail, where it
-- is near (only the job still running is under it, usually), not past the k moved.
-- pcall: a list of the wrong type took no mark and no job (take_batch reports it).
local n = redis.pcall("LPOS", list, ARGV[8], "RANK", "-1")
if type(n) ~= "number" then n = nil end
if n then redis.call("LREM", list, "-1", ARGV[8]) end
n = n or 0
local function undo()
  -- Back to the fetch end of their queue, newest first, as if never moved (the jobs
  -- enter Lua: only when fenced, paused, stale, or a queue before the guess has a job).
  for _ = 1, n do redis.call("LMOVE", list, KEYS[guess], "LEFT", "RIGHT") end
  n = 0
end
local refused = fenced(KEYS[2])
if refused then
  undo()
  return refused
end
beat(KEYS[3], ARGV[5])
local since = ARGV[10] or ""
local newest, stale = wake_moved(since, ARGV[7])
if stale then
  undo()
  redis.call("HDEL", ARGV[2], ARGV[3])
  return {0, {}, {}, {}, newest, {}, 1}
end
local paused, names = paused_keys(ARGV[6], ARGV[7], since)
-- Strict order: every queue before the guess must be empty (or paused), as in fetch_moved.lua.
if n > 0 and out_of_order(4, guess, paused) then undo() end
local indexes, jobs, bad = {}, {}, {}
-- Fewer than k moved: the guess ran dry; the rest from the queues after it. None: the
-- queue choice from the first.
local at = n > 0 and guess or 4
if n < k then at = take_batch(list, n > 0 and guess + 1 or 4, k - n, paused, bad, indexes, jobs) end
if n > 0 and #jobs == 0 then at = guess end
for j = 1, #indexes do indexes[j] = indexes[j] - 3 end
local total = n + #jobs
if total > 0 then
  redis.call("HSET", ARGV[2], ARGV[3], ARGV[4] .. ":" .. total .. ":0")
else
  redis.call("HDEL", ARGV[2], ARGV[3])
end
-- Every queue before the last job's was empty (all of them when fewer than k came).
newest = learned_at(since, newest, ARGV[7], at ~= 4 or total < k)
return {n, indexes, jobs, bad, newest, names, 0}
