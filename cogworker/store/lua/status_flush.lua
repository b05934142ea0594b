-- Writes the job statuses and history entries a process buffered, in one call.
-- KEYS: n status hashes, then one history list per entry (m of them), then done:<hour>
-- buckets (docs/architecture.md#status-buckets).
-- ARGV: n, history_max, history_ttl, m, done_ttl; per status: ttl, updated_at, compare
-- (1/0), then the values of FIELDS below in order; then one JSON entry per history key;
-- then per bucket one argument of lines "jid<TAB>record" (one HSET per 500 of them, one
-- EXPIRE).
-- Every status write sets every field (empty when it doesn't apply): no DEL needed.
-- compare=1: a status older than the one stored (another process's write landed first) is
-- skipped; the caller sends 0 only for a success filed by the worker that ran the job.
-- History: LTRIM only once the list is longer than history_max; its TTL is set again to
-- history_ttl on every entry (so it lasts history_ttl after the job's last execution).
-- Best-effort throughout: a key of the wrong type skips that key, never the rest.
local FIELDS = {'state', 'attempt', 'queue', 'class', 'identity', 'started_at', 'at', 'error_class', 'reason'}
local nf = #FIELDS
local n = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local history_ttl = tonumber(ARGV[3])
local m = tonumber(ARGV[4])
local done_ttl = tonumber(ARGV[5])
local i = 6
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
local CHUNK = 1000  -- values per HSET: unpack has a stack limit
for k = n + m + 1, #KEYS do
  local key = KEYS[k]
  local values, ok = {}, true
  for jid, record in string.gmatch(ARGV[i], '([^\t\n]+)\t([^\n]+)') do
    values[#values + 1] = jid
    values[#values + 1] = record
    if #values >= CHUNK then
      ok = ok and type(redis.pcall('HSET', key, unpack(values))) == 'number'
      values = {}
    end
  end
  if #values > 0 then ok = ok and type(redis.pcall('HSET', key, unpack(values))) == 'number' end
  if ok then redis.pcall('EXPIRE', key, done_ttl) end
  i = i + 1
end
return n
