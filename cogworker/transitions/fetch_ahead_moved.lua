--! include _fence
--! include _queues
--! include _take_many
-- The look-ahead fetch of k while the lease holds (docs/architecture.md#lookahead-k): this script runs
-- last in one MULTI after
--   LREM <list> -1 <ack>   (one per ack riding; then one DEL of their orphan counters)
--   LPUSH <list> <mark>                       (this fetch's: MARK:<number>)
--   RPOPLPUSH <guessed queue> <list>          (k of them: LMOVE RIGHT LEFT)
-- so that no payload enters Lua (fetch_moved.lua's way, for k jobs). Where it finds the
-- mark says how many they moved (those above it). It checks everything
-- fetch_ahead.lua checks and moves them back, in order, when they must not stand; it
-- takes what is still missing as fetch_ahead.lua does (only then do payloads enter Lua).
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = fence: this identity's fence
-- KEYS[3] = last_beat: the last_beat hash
-- KEYS[4] = wake: the wake stream (known-empty queues are checked against it)
-- KEYS[5] = paused: the paused set
-- KEYS[6] = ahead: the look-ahead records
-- KEYS[7..] = queues: the queues in order
-- ARGV[1] = k: how many jobs to take
-- ARGV[2] = owner: this identity, for the record
-- ARGV[3] = number: the fetch's number
-- ARGV[4] = identity: the identity whose beat is refreshed (or "")
-- ARGV[5] = queue_prefix: the queue key prefix (paused names matched, as in fetch.lua)
-- ARGV[6] = mark: the mark
-- ARGV[7] = guess: the guessed queue's index in KEYS
-- ARGV[8] = since: fetch.lua's since (absent = "")
-- Returns {n, queue indexes, jobs, unreadable queues with Redis's error, the wake ID the
-- worker learns empty queues at or "", the paused names, 1 if stale else 0}: the first n
-- moves' replies are jobs that stand (from the guessed queue), then those it took itself,
-- newer; records "<number>:<total>:0" in the look-ahead records (or deletes the record).
local list = KEYS[1]
local k = tonumber(ARGV[1])
local guess = tonumber(ARGV[7])
-- The mark is this fetch's own (its number in it): looked for from the tail, where it
-- is near (only the job still running is under it, usually), not past the k moved.
-- pcall: a list of the wrong type took no mark and no job (take_many reports it).
local n = redis.pcall("LPOS", list, ARGV[6], "RANK", "-1")
if type(n) ~= "number" then n = nil end
if n then redis.call("LREM", list, "-1", ARGV[6]) end
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
beat(KEYS[3], ARGV[4])
local since = ARGV[8] or ""
local newest, stale = wake_moved(since, KEYS[4])
if stale then
  undo()
  redis.call("HDEL", KEYS[6], ARGV[2])
  return {0, {}, {}, {}, newest, {}, 1}
end
local paused, names = paused_keys(KEYS[5], ARGV[5], since, 7)
-- Strict order: every queue before the guess must be empty (or paused), as in fetch_moved.lua.
if n > 0 and out_of_order(7, guess, paused) then undo() end
local indexes, jobs, bad = {}, {}, {}
-- Fewer than k moved: the guess ran dry; the rest from the queues after it. None: the
-- queue choice from the first.
local at = n > 0 and guess or 7
if n < k then at = take_many(list, n > 0 and guess + 1 or 7, k - n, paused, bad, indexes, jobs) end
if n > 0 and #jobs == 0 then at = guess end
for j = 1, #indexes do indexes[j] = indexes[j] - 6 end
local total = n + #jobs
if total > 0 then
  redis.call("HSET", KEYS[6], ARGV[2], ARGV[3] .. ":" .. total .. ":0")
else
  redis.call("HDEL", KEYS[6], ARGV[2])
end
-- Every queue before the last job's was empty (all of them when fewer than k came).
newest = learned_at(since, newest, KEYS[4], at ~= 7 or total < k)
return {n, indexes, jobs, bad, newest, names, 0}
