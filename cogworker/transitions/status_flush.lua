--! include _declared
-- Writes the job statuses and history entries a process buffered, in one call, and trims
-- what is retained of the finished jobs with keys of their own (docs/architecture.md#retention).
-- The first-try successes don't come here: they go to the done ring with plain commands
-- (done_room.lua reserves their room), so their records never enter Lua.
-- KEYS[1..n] = statuses: n status hashes
-- KEYS[n+1..n+m] = histories: one history list per entry (m of them)
-- KEYS[n+m+1] = retained_succeeded: the finished jobs with keys of their own that
-- succeeded (jid -> when it finished)
-- KEYS[n+m+2] = retained_failed: the same, failed
-- KEYS[n+m+3..] = declared(key): the enq: buckets of the gone groups ("enq:<hour>"), and
-- the status: and history: keys of the jobs the trim sheds ("status:<jid>",
-- "history:<jid>"), each named by the ARGV beside it (_declared.lua)
-- ARGV[1] = n (derived): how many status rows
-- ARGV[2] = history_max: entries kept per history list
-- ARGV[3] = history_ttl: a history list's TTL (s)
-- ARGV[4] = m (derived): how many history entries
-- ARGV[5] = now: epoch s
-- ARGV[6] = status_max: successes retained
-- ARGV[7] = status_max_failed: failures retained
-- ARGV[8] = keep: seconds retained
-- ARGV[9] = g (derived): how many enq groups of the status rows
-- ARGV[10..] = declared(name): the names of KEYS[n+m+3..], in order
-- ARGV[..] = rows: per status: its jid, ttl, updated_at, compare (1/0), then the values
-- of FIELDS below in order
-- ARGV[..] = entries: one JSON entry per history key
-- ARGV[..] = gone: per enq group of the status rows, its spec and the jids
-- (newline-separated)
-- ARGV[last] = ended: with status off, the finished jobs of the history entries (lines
-- "1|2<TAB>jid").
-- Returns {n, jid...}: the jobs the next call may shed (its hint), or {0, "need",
-- name...} (nothing written) if a key it would write wasn't given.
-- An enq spec names the enq:<hour> bucket whose fields of these jobs go (they finished,
-- so they are no longer queued): the hour, or minus the hour for that hour and the
-- next, or 0 for none.
-- Every status write sets every field (empty when it doesn't apply): no DEL needed.
-- compare=1: a status older than the one stored (another process's write landed first) is
-- skipped; the caller sends 0 only for a success filed by the worker that ran the job.
-- History: LTRIM only once the list is longer than history_max; its TTL is set again to
-- history_ttl on every entry (so it lasts history_ttl after the job's last execution).
-- Retention, amortised (no scan, no call of its own): a status row that says succeeded or
-- dead adds its job to a zset; each zset then sheds, oldest first, what is older than
-- `keep` and what is over its count, at most as many as this call added plus SLACK,
-- deleting their status: and history: keys. What it sheds is worked out before any write
-- (the sets as they will be, this call's additions and removals applied), and those keys
-- are asked for (_declared.lua): the caller gives the ones the last call hinted at.
-- Best-effort throughout: a key of the wrong type skips that key, never the rest.
local FIELDS = {'state', 'attempt', 'queue', 'class', 'identity', 'started_at', 'at', 'error_class', 'reason'}
local nf = #FIELDS
local n = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local history_ttl = tonumber(ARGV[3])
local m = tonumber(ARGV[4])
local now = ARGV[5]
local maxes = {tonumber(ARGV[6]), tonumber(ARGV[7])}
local keep = tonumber(ARGV[8])
local g = tonumber(ARGV[9])
local retained = {KEYS[n + m + 1], KEYS[n + m + 2]}
local added = {{}, {}}  -- per zset: score, member, ...
local removed = {{}, {}}  -- per zset: jid -> true, for the rows that finished in the other
local CHUNK = 1000  -- values per variadic command: unpack has a stack limit
local SLACK = 50     -- trimmed per call beyond what it added: a lowered bound catches up
local HOUR = 3600
declare(10, #KEYS - (n + m + 2))

local function chunked(command, key, values)
  local ok = true
  for s = 1, #values, CHUNK do
    local part = {unpack(values, s, math.min(s + CHUNK - 1, #values))}
    if key then
      ok = type(redis.pcall(command, key, unpack(part))) == 'number' and ok
    else
      ok = type(redis.pcall(command, unpack(part))) == 'number' and ok
    end
  end
  return ok
end

-- Scores: this call's time, a microsecond apart in the order the jobs came (the buffer's
-- order of their ends), so the oldest go first even within one call.
local t = tonumber(now)
local function finished(which, jid)
  local list = added[which]
  list[#list + 1] = string.format('%.6f', t + (#list / 2) * 0.000001)
  list[#list + 1] = jid
end

-- The rows, read first: which are newer than the status stored (compare=1; a row of a key
-- an earlier row of this call writes compares with that one), and which finished.
local first_row = 10 + #KEYS - (n + m + 2)
local newest, wrote = {}, {}
local i = first_row
for k = 1, n do
  local key, updated_at = KEYS[k], ARGV[i + 2]
  local fresh = true
  if ARGV[i + 3] == '1' then
    local stored = redis.pcall('HGET', key, 'updated_at')
    if type(stored) ~= 'table' and wrote[key] then stored = wrote[key] end
    fresh = stored == false or (type(stored) == 'string' and (tonumber(stored) or 0) <= tonumber(updated_at))
  end
  newest[k] = fresh
  if fresh then
    wrote[key] = updated_at
    local state = ARGV[i + 4]
    if state == 'succeeded' or state == 'dead' then
      local which = state == 'succeeded' and 1 or 2
      finished(which, ARGV[i])
      removed[3 - which][ARGV[i]] = true  -- a dead job retried from the API, now done
    end
  end
  i = i + 4 + nf
end
local first_entry = i
i = i + m
local groups = {}
for _ = 1, g do
  local spec, jids = tonumber(ARGV[i]) or 0, {}
  for jid in string.gmatch(ARGV[i + 1], '[^\n]+') do jids[#jids + 1] = jid end
  if spec ~= 0 and #jids > 0 then  -- finished jobs are no longer queued: their enq: field goes
    groups[#groups + 1] = {declared_key('enq', string.format('%d', math.abs(spec))), jids}
    if spec < 0 then groups[#groups + 1] = {declared_key('enq', string.format('%d', -spec + HOUR)), jids} end
  end
  i = i + 2
end
-- With status off, the finished jobs whose history entries were written ("1<TAB>jid" a
-- success, "2<TAB>jid" a failure): retained by the same bounds.
for which, jid in string.gmatch(ARGV[i] or '', '([12])\t([^\n]+)') do finished(tonumber(which), jid) end

-- What the trim below sheds from each set, worked out before any write: the set's members
-- ascending as they will be once this call's removals and additions are applied (a member
-- added again moves to its new score), its oldest (below the age bound, at most budget),
-- then the lowest over its count (at most what is left of budget). Best-effort as the trim
-- is: a set of the wrong type sheds nothing.
local AGED = '(' .. (t - keep)  -- the trim's bound, as it reads it
local function ascending(which, count, below)  -- the lowest `count` jids, scores < below
  local key, adds, skip = retained[which], added[which], {}
  local scores = {}
  for j = 1, #adds, 2 do scores[adds[j + 1]] = tonumber(adds[j]) end
  local extra = #adds / 2
  for jid in pairs(removed[which]) do skip[jid] = true; extra = extra + 1 end
  local read
  if below then
    read = redis.pcall('ZRANGEBYSCORE', key, '-inf', AGED, 'WITHSCORES', 'LIMIT', 0, count + extra)
  else
    read = redis.pcall('ZRANGE', key, 0, count + extra - 1, 'WITHSCORES')
  end
  if type(read) ~= 'table' then return nil end
  local all = {}
  for j = 1, #read, 2 do
    if not skip[read[j]] and not scores[read[j]] then all[#all + 1] = {tonumber(read[j + 1]), read[j]} end
  end
  local limit = below and tonumber(string.sub(AGED, 2))
  for jid, score in pairs(scores) do
    if not limit or score < limit then all[#all + 1] = {score, jid} end
  end
  table.sort(all, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local out = {}
  for j = 1, math.min(count, #all) do out[j] = all[j][2] end
  return out
end
local function size_after(which)  -- the set's size once this call's removals and additions are applied
  local key, size = retained[which], redis.pcall('ZCARD', retained[which])
  if type(size) ~= 'number' then return nil end
  local seen = {}
  for jid in pairs(removed[which]) do
    if redis.pcall('ZSCORE', key, jid) then size = size - 1 end
    seen[jid] = true
  end
  for j = 2, #added[which], 2 do
    local jid = added[which][j]
    if not seen[jid] then
      seen[jid] = true
      if removed[which][jid] or not redis.pcall('ZSCORE', key, jid) then size = size + 1 end
    end
  end
  return size
end
local shed = {{}, {}}
for which = 1, 2 do
  local budget = #added[which] / 2 + SLACK
  local old = ascending(which, budget, true)
  local size = size_after(which)
  if old and size then
    local pop = size - #old - maxes[which]
    pop = math.max(0, math.min(pop, budget - #old))
    shed[which] = pop > 0 and ascending(which, #old + pop, false) or old
    for _, jid in ipairs(shed[which]) do
      declared_key("status", jid)
      declared_key("history", jid)
    end
  end
end
local need = needs_reply()
if need then return need end

i = first_row
local args = {'updated_at', false}
for j = 1, nf do args[2 * j + 1] = FIELDS[j] end
for k = 1, n do
  if newest[k] then
    local key = KEYS[k]
    args[2] = ARGV[i + 2]
    for j = 1, nf do args[2 * j + 2] = ARGV[i + 3 + j] end
    if type(redis.pcall('HSET', key, unpack(args))) == 'number' then
      redis.pcall('EXPIRE', key, tonumber(ARGV[i + 1]))
    end
    local state = ARGV[i + 4]
    if state == 'succeeded' or state == 'dead' then
      redis.pcall('ZREM', retained[state == 'succeeded' and 2 or 1], ARGV[i])
    end
  end
  i = i + 4 + nf
end
i = first_entry
for k = n + 1, n + m do
  local key = KEYS[k]
  local length = redis.pcall('RPUSH', key, ARGV[i])
  if type(length) == 'number' then
    if length > cap then redis.pcall('LTRIM', key, -cap, -1) end
    redis.pcall('EXPIRE', key, history_ttl)
  end
  i = i + 1
end
for _, group in ipairs(groups) do chunked('HDEL', group[1], group[2]) end

-- Forgets shed jobs: their status: and history: keys (asked for above; a job shed that
-- wasn't foreseen, which a tie of scores could make, keeps them until their TTL).
local function forget(gone)
  local keys = {}
  for j = 1, #gone, 2 do
    keys[#keys + 1] = declared_key("status", gone[j])
    keys[#keys + 1] = declared_key("history", gone[j])
  end
  chunked('DEL', false, keys)
end

for which = 1, 2 do
  local key = retained[which]
  local budget = #added[which] / 2 + SLACK
  if #added[which] > 0 then chunked('ZADD', key, added[which]) end
  local old = redis.pcall('ZRANGEBYSCORE', key, '-inf', AGED, 'WITHSCORES', 'LIMIT', 0, budget)
  if type(old) == 'table' and #old > 0 then
    local members = {}
    for j = 1, #old, 2 do members[#members + 1] = old[j] end
    chunked('ZREM', key, members)
    forget(old)
    budget = budget - #members
  end
  local size = redis.pcall('ZCARD', key)
  if type(size) == 'number' and size > maxes[which] and budget > 0 then
    local popped = redis.pcall('ZPOPMIN', key, math.min(size - maxes[which], budget))
    if type(popped) == 'table' then forget(popped) end
  end
end

-- The hint: per set, the jobs the next call may shed, for the caller to give their keys
-- (twice this call's additions, and 10): its lowest if it is about full, else those that
-- will be past the age bound within a minute.
local hint = {n}
for which = 1, 2 do
  local key, want = retained[which], #added[which] + 10
  local size = redis.pcall('ZCARD', key)
  local next_ones
  if type(size) == 'number' and size + want > maxes[which] then
    next_ones = redis.pcall('ZRANGE', key, 0, want - 1)
  elseif type(size) == 'number' then
    next_ones = redis.pcall('ZRANGEBYSCORE', key, '-inf', '(' .. (t + 60 - keep), 'LIMIT', 0, want)
  end
  if type(next_ones) == 'table' then
    for _, jid in ipairs(next_ones) do hint[#hint + 1] = jid end
  end
end
return hint
