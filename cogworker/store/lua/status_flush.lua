-- Writes the job statuses and history entries a process buffered, in one call, and trims
-- what is retained of the finished jobs with keys of their own (docs/architecture.md#retention).
-- The first-try successes don't come here: they go to the done ring with plain commands
-- (done_room.lua reserves their room), so their records never enter Lua.
-- KEYS: n status hashes, then one history list per entry (m of them), then the two
-- retained zsets (the finished jobs with keys of their own, successes and failures apart:
-- jid -> when it finished).
-- ARGV: n, history_max, history_ttl, m, now, status_max, status_max_failed, keep (seconds),
-- the status:, history: and enq: key prefixes, g (enq groups of the status rows); per
-- status: ttl, updated_at, compare (1/0), then the values of FIELDS below in order; then
-- one JSON entry per history key; then per enq group of the status rows its spec and the
-- jids (newline-separated); then, with status off, the finished jobs of the history
-- entries (lines "1|2<TAB>jid"). An enq spec names the enq:<hour> bucket whose fields of
-- these jobs go (they finished, so they are no longer queued): the hour, or minus the
-- hour for that hour and the next, or 0 for none.
-- Every status write sets every field (empty when it doesn't apply): no DEL needed.
-- compare=1: a status older than the one stored (another process's write landed first) is
-- skipped; the caller sends 0 only for a success filed by the worker that ran the job.
-- History: LTRIM only once the list is longer than history_max; its TTL is set again to
-- history_ttl on every entry (so it lasts history_ttl after the job's last execution).
-- Retention, amortised (no scan, no call of its own): a status row that says succeeded or
-- dead adds its job to a zset; each zset then sheds, oldest first, what is older than
-- `keep` and what is over its count, at most as many as this call added plus SLACK,
-- deleting their status: and history: keys.
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
local status_prefix, history_prefix, enq_prefix = ARGV[9], ARGV[10], ARGV[11]
local g = tonumber(ARGV[12])
local retained = {KEYS[n + m + 1], KEYS[n + m + 2]}
local added = {{}, {}}  -- per zset: score, member, ...
local CHUNK = 1000  -- values per variadic command: unpack has a stack limit
local SLACK = 50     -- trimmed per call beyond what it added: a lowered bound catches up

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

local i = 13
local args = {'updated_at', false}
for j = 1, nf do args[2 * j + 1] = FIELDS[j] end
for k = 1, n do
  local key = KEYS[k]
  local ttl, updated_at = tonumber(ARGV[i]), ARGV[i + 1]
  local newest = true
  if ARGV[i + 2] == '1' then
    local stored = redis.pcall('HGET', key, 'updated_at')
    newest = stored == false or (type(stored) == 'string' and (tonumber(stored) or 0) <= tonumber(updated_at))
  end
  if newest then
    args[2] = updated_at
    for j = 1, nf do args[2 * j + 2] = ARGV[i + 2 + j] end
    if type(redis.pcall('HSET', key, unpack(args))) == 'number' then
      redis.pcall('EXPIRE', key, ttl)
    end
    local state = ARGV[i + 3]
    if state == 'succeeded' or state == 'dead' then
      local jid = string.sub(key, #status_prefix + 1)
      local which = state == 'succeeded' and 1 or 2
      finished(which, jid)
      redis.pcall('ZREM', retained[3 - which], jid)  -- a dead job retried from the API, now done
    end
  end
  i = i + 3 + nf
end
for k = n + 1, n + m do
  local key = KEYS[k]
  local length = redis.pcall('RPUSH', key, ARGV[i])
  if type(length) == 'number' then
    if length > cap then redis.pcall('LTRIM', key, -cap, -1) end
    redis.pcall('EXPIRE', key, history_ttl)
  end
  i = i + 1
end
local HOUR = 3600
local function unqueue(spec, jids)  -- finished jobs are no longer queued: their enq: field goes
  if spec == 0 or #jids == 0 then return end
  chunked('HDEL', enq_prefix .. string.format('%d', math.abs(spec)), jids)
  if spec < 0 then chunked('HDEL', enq_prefix .. string.format('%d', -spec + HOUR), jids) end
end
for _ = 1, g do
  local jids = {}
  for jid in string.gmatch(ARGV[i + 1], '[^\n]+') do jids[#jids + 1] = jid end
  unqueue(tonumber(ARGV[i]) or 0, jids)
  i = i + 2
end
-- With status off, the finished jobs whose history entries were written ("1<TAB>jid" a
-- success, "2<TAB>jid" a failure): retained by the same bounds.
for which, jid in string.gmatch(ARGV[i] or '', '([12])\t([^\n]+)') do finished(tonumber(which), jid) end

-- Forgets shed jobs: their status: and history: keys.
local function forget(shed)
  local keys = {}
  for j = 1, #shed, 2 do
    keys[#keys + 1] = status_prefix .. shed[j]
    keys[#keys + 1] = history_prefix .. shed[j]
  end
  chunked('DEL', false, keys)
end

for which = 1, 2 do
  local key = retained[which]
  local budget = #added[which] / 2 + SLACK
  if #added[which] > 0 then chunked('ZADD', key, added[which]) end
  local old = redis.pcall('ZRANGEBYSCORE', key, '-inf', '(' .. (t - keep), 'WITHSCORES', 'LIMIT', 0, budget)
  if type(old) == 'table' and #old > 0 then
    local members = {}
    for j = 1, #old, 2 do members[#members + 1] = old[j] end
    chunked('ZREM', key, members)
    forget(old)
    budget = budget - #members
  end
  local size = redis.pcall('ZCARD', key)
  if type(size) == 'number' and size > maxes[which] and budget > 0 then
    local shed = redis.pcall('ZPOPMIN', key, math.min(size - maxes[which], budget))
    if type(shed) == 'table' then forget(shed) end
  end
end
return n
