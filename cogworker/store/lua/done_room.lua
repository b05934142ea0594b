-- Reserves room in the done ring for n first-try successes, and drops its oldest buckets
-- (docs/architecture.md#retention). The caller then files the records itself with plain
-- HSETs into the buckets returned: a record never enters Lua, where each one cost more
-- than its HSET (every argument copied and hashed into a Lua string, then back).
-- KEYS[1] = the done ring (bucket names, newest first), KEYS[2] = the fill counts
-- (done_fill: bucket -> records reserved in it, so that flushes racing each other never
-- fill a bucket past its size; a bucket without a count is measured with HLEN).
-- ARGV: n, now, bucket size, status_max, keep (seconds), the done: key prefix.
-- Returns {bucket, count, bucket, count, ...}: the n records' places, in order. The head
-- bucket is filled while it has room and is of this hour, then a new one is opened.
-- The oldest buckets go whole, a few a call: while the others still hold status_max
-- successes, or once one is older than keep + 1 h (its TTL would take it anyway).
-- Best-effort: a bucket of the wrong type is never filled, and counts as empty.
local ring, fill = KEYS[1], KEYS[2]
local n, t, size = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local status_max, keep, prefix = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local HOUR = 3600
local hour = math.floor(t / HOUR) * HOUR

local function filled(name)  -- nil: not a hash, never filled
  local len = redis.pcall('HLEN', name)
  if type(len) ~= 'number' then return nil end
  local count = redis.pcall('HGET', fill, name)
  return type(count) == 'string' and tonumber(count) or len
end

local head = redis.pcall('LINDEX', ring, 0)
if type(head) ~= 'string' then head = nil end
local room = 0
if head and tonumber(string.match(head, ':(%d+):%d+$')) == hour then room = size - (filled(head) or size) end
local spans, left = {}, n
while left > 0 do
  if room <= 0 then
    local seq = head and tonumber(string.match(head, ':(%d+)$')) or 0
    head = prefix .. string.format('%d', hour) .. ':' .. (seq + 1)
    redis.pcall('LPUSH', ring, head)
    room = size
  end
  local take = math.min(room, left)
  spans[#spans + 1] = head
  spans[#spans + 1] = take
  redis.pcall('HINCRBY', fill, head, take)
  room, left = room - take, left - take
end

local names = redis.pcall('LRANGE', ring, 0, -1)
if type(names) == 'table' then
  local sizes, total = {}, 0
  for j = 1, #names do
    sizes[j] = filled(names[j]) or 0
    total = total + sizes[j]
  end
  for j = #names, math.max(2, #names - 7), -1 do
    local h = tonumber(string.match(names[j], ':(%d+):%d+$')) or 0
    if total - sizes[j] < status_max and h + HOUR > t - keep then break end
    redis.pcall('RPOP', ring)
    redis.pcall('DEL', names[j])
    redis.pcall('HDEL', fill, names[j])
    total = total - sizes[j]
  end
end
return spans
