-- Writes the job statuses and history entries a process buffered, in one call, and trims
-- what is retained of finished jobs (docs/architecture.md#retention).
-- KEYS: n status hashes, then one history list per entry (m of them), then the done ring
-- (a list of done: bucket names, newest first), then the two retained zsets (the finished
-- jobs with keys of their own, successes and failures apart: jid -> when it finished).
-- ARGV: n, history_max, history_ttl, m, done_ttl, now, status_max, status_max_failed,
-- keep (seconds), the status:, history:, done: and enq: key prefixes, g (enq groups of
-- the status rows), bucket size; per status: ttl, updated_at, compare (1/0), then the values of
-- FIELDS below in order; then one JSON entry per history key; then the first-try
-- successes: their number of groups, then per group its enq spec and one argument of
-- lines "jid<TAB>record" (docs/architecture.md#status-buckets); then per enq group of the
-- status rows its spec and the jids (newline-separated); then, with status off, the
-- finished jobs of the history entries (lines "1|2<TAB>jid"). An enq spec names the enq:<hour>
-- bucket whose fields of these jobs go (they finished, so they are no longer queued): the
-- hour, or minus the hour for that hour and the next, or 0 for none.
-- Every status write sets every field (empty when it doesn't apply): no DEL needed.
-- compare=1: a status older than the one stored (another process's write landed first) is
-- skipped; the caller sends 0 only for a success filed by the worker that ran the job.
-- History: LTRIM only once the list is longer than history_max; its TTL is set again to
-- history_ttl on every entry (so it lasts history_ttl after the job's last execution).
-- Retention, amortised (no scan, no call of its own): first-try successes fill the done
-- bucket at the ring's head, done:<hour>:<seq>, a new one once it holds `bucket size` or
-- the hour changed; the oldest is dropped whole, one DEL, once the newer ones hold
-- status_max successes or it is older than `keep` + 1 h. A status row that says succeeded or dead adds its job to a zset; each
-- zset then sheds, oldest first, what is older than `keep` and what is over its count, at
-- most as many as this call added plus SLACK, deleting their status: and history: keys.
-- Best-effort throughout: a key of the wrong type skips that key, never the rest.
local FIELDS = {'state', 'attempt', 'queue', 'class', 'identity', 'started_at', 'at', 'error_class', 'reason'}
local nf = #FIELDS
local n = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local history_ttl = tonumber(ARGV[3])
local m = tonumber(ARGV[4])
local done_ttl = tonumber(ARGV[5])
local now = ARGV[6]
local maxes = {tonumber(ARGV[7]), tonumber(ARGV[8])}
local keep = tonumber(ARGV[9])
local status_prefix, history_prefix, done_prefix, enq_prefix = ARGV[10], ARGV[11], ARGV[12], ARGV[13]
local g = tonumber(ARGV[14])
local bucket_size = tonumber(ARGV[15])
local ring = KEYS[n + m + 1]
local retained = {KEYS[n + m + 2], KEYS[n + m + 3]}
local added = {{}, {}}  -- per zset: score, member, ...
local CHUNK = 1000  -- values per variadic command: unpack has a stack limit
local SLACK = 50     -- trimmed per call beyond what it added: a lowered bound catches up
local HOUR = 3600

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

local i = 16
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
-- The done ring: its head bucket while it has room and is of this hour, else a new one.
local hour = math.floor(t / HOUR) * HOUR
local head = redis.pcall('LINDEX', ring, 0)
if type(head) ~= 'string' then head = nil end
local room = 0
local function open_bucket()
  local seq = head and tonumber(string.match(head, ':(%d+)$')) or 0
  head = done_prefix .. string.format('%d', hour) .. ':' .. (seq + 1)
  redis.pcall('LPUSH', ring, head)
  room = bucket_size
end
if head then
  local h = tonumber(string.match(head, ':(%d+):%d+$'))
  local size = redis.pcall('HLEN', head)
  if h == hour and type(size) == 'number' then room = bucket_size - size end
end
local values = {}
local function fill()
  if #values > 0 and chunked('HSET', head, values) then redis.pcall('EXPIRE', head, done_ttl) end
  values = {}
end
local function unqueue(spec, jids)  -- finished jobs are no longer queued: their enq: field goes
  if spec == 0 or #jids == 0 then return end
  chunked('HDEL', enq_prefix .. string.format('%d', math.abs(spec)), jids)
  if spec < 0 then chunked('HDEL', enq_prefix .. string.format('%d', -spec + HOUR), jids) end
end
local groups = tonumber(ARGV[i])
i = i + 1
for _ = 1, groups do
  local jids = {}
  for jid, record in string.gmatch(ARGV[i + 1], '([^\t\n]+)\t([^\n]+)') do
    if room <= 0 then
      fill()
      open_bucket()
    end
    values[#values + 1] = jid
    values[#values + 1] = record
    jids[#jids + 1] = jid
    room = room - 1
  end
  unqueue(tonumber(ARGV[i]) or 0, jids)
  i = i + 2
end
fill()
-- Drops the oldest buckets, whole, a few a call: while the others still hold status_max
-- successes, or once one is older than keep + 1 h (its TTL would take it anyway).
local names = redis.pcall('LRANGE', ring, 0, -1)
if type(names) == 'table' then
  local sizes, total = {}, 0
  for j = 1, #names do
    local size = redis.pcall('HLEN', names[j])
    sizes[j] = type(size) == 'number' and size or 0
    total = total + sizes[j]
  end
  for j = #names, math.max(2, #names - 7), -1 do
    local h = tonumber(string.match(names[j], ':(%d+):%d+$')) or 0
    if total - sizes[j] < maxes[1] and h + HOUR > t - keep then break end
    redis.pcall('RPOP', ring)
    redis.pcall('DEL', names[j])
    total = total - sizes[j]
  end
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
