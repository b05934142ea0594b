-- Writes the job statuses and history entries a process buffered, in one call.
-- KEYS: n status hashes, then one history list per entry.
-- ARGV: n, history_max, history_ttl; per status: ttl, updated_at, field count, fields
-- and values...; then one JSON entry per history key.
-- A status older than the one stored (another process's write landed first) is skipped.
-- Best-effort throughout: a key of the wrong type skips that key, never the rest.
local n = tonumber(ARGV[1])
local cap = tonumber(ARGV[2])
local history_ttl = tonumber(ARGV[3])
local i = 4
for k = 1, n do
  local key = KEYS[k]
  local ttl, updated_at, count = tonumber(ARGV[i]), ARGV[i + 1], tonumber(ARGV[i + 2])
  local fields = {}
  for j = 1, count * 2 do fields[j] = ARGV[i + 2 + j] end
  i = i + 3 + count * 2
  local stored = redis.pcall('HGET', key, 'updated_at')
  if stored == false or (type(stored) == 'string' and (tonumber(stored) or 0) <= tonumber(updated_at)) then
    redis.pcall('DEL', key)
    redis.pcall('HSET', key, 'updated_at', updated_at, unpack(fields))
    redis.pcall('EXPIRE', key, ttl)
  end
end
for k = n + 1, #KEYS do
  local key = KEYS[k]
  if type(redis.pcall('RPUSH', key, ARGV[i])) == 'number' then
    redis.pcall('LTRIM', key, -cap, -1)
    redis.pcall('EXPIRE', key, history_ttl)
  end
  i = i + 1
end
return n
