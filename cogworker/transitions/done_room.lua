--! include _declared
-- Reserves room in the done ring for n first-try successes, and drops its oldest buckets
-- (docs/architecture.md#retention). The caller then files the records itself with plain
-- HSETs into the buckets returned: a record never enters Lua, where each one cost more
-- than its HSET (every argument copied and hashed into a Lua string, then back).
-- KEYS[1] = ring: the done ring (bucket names, newest first)
-- KEYS[2] = fill: the fill counts (done_fill: bucket -> records reserved in it, so that
-- flushes racing each other never fill a bucket past its size; a bucket without a
-- count is measured with HLEN)
-- KEYS[3..] = declared(key): buckets ("done:<hour>:<seq>", _declared.lua), each named by
-- the ARGV beside it: those of the ring, and those this call may open
-- ARGV[1] = n: how many records
-- ARGV[2] = now: epoch s
-- ARGV[3] = size: the bucket size
-- ARGV[4] = status_max: successes kept
-- ARGV[5] = keep: seconds kept
-- ARGV[6..] = declared(name): the names of KEYS[3..], in order
-- Returns {bucket, count, bucket, count, ...}: the n records' places, in order; or
-- {0, "need", name...} (nothing written) if a bucket of the ring, or one it opens, wasn't
-- given. The head bucket is filled while it has room and is of this hour, then a new one
-- (the next in sequence) is opened.
-- The oldest buckets go whole, a few a call: while the others still hold status_max
-- successes, or once one is older than keep + 1 h (its TTL would take it anyway). A ring
-- entry that names no bucket (not "...:<hour>:<seq>") is dropped from the ring alone.
-- Best-effort: a bucket of the wrong type is never filled, and counts as empty.
local ring, fill = KEYS[1], KEYS[2]
local n, t, size = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local status_max, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
local HOUR = 3600
local hour = math.floor(t / HOUR) * HOUR
declare(6)

local function bucket_key(name)  -- a ring entry's bucket (nil: it names none, or not given)
  local h, seq = string.match(name, ':(%d+):(%d+)$')
  local key = h and declared_key("done", h .. ":" .. seq)
  if key and key ~= name then return nil end -- an entry that isn't this namespace's bucket
  return key or nil
end

local function filled(name)  -- nil: not a hash, never filled
  local key = bucket_key(name)
  local len = key and redis.pcall('HLEN', key)
  if type(len) ~= 'number' then return nil end
  local count = redis.pcall('HGET', fill, name)
  return type(count) == 'string' and tonumber(count) or len
end

-- Every bucket of the ring, asked for first: all are measured below.
local names = redis.pcall('LRANGE', ring, 0, -1)
if type(names) ~= 'table' then names = nil end
for _, name in ipairs(names or {}) do bucket_key(name) end
local need = needs_reply()
if need then return need end
local head = names and names[1]
local room = 0
if head and tonumber(string.match(head, ':(%d+):%d+$')) == hour then room = size - (filled(head) or size) end
-- The buckets it opens, each the next in sequence of this hour, asked for before any write.
local opened, left, seq = {}, n, head and tonumber(string.match(head, ':(%d+)$')) or 0
local ahead = room
while left > 0 do
  if ahead <= 0 then
    seq = seq + 1
    opened[#opened + 1] = declared_key("done", string.format('%d', hour) .. ":" .. string.format('%d', seq))
    ahead = size
  end
  local take = math.min(ahead, left)
  ahead, left = ahead - take, left - take
end
need = needs_reply()
if need then return need end

local spans, next_open = {}, 1
left = n
while left > 0 do
  if room <= 0 then
    head = opened[next_open]
    next_open = next_open + 1
    redis.pcall('LPUSH', ring, head)
    room = size
  end
  local take = math.min(room, left)
  spans[#spans + 1] = head
  spans[#spans + 1] = take
  redis.pcall('HINCRBY', fill, head, take)
  room, left = room - take, left - take
end

names = redis.pcall('LRANGE', ring, 0, -1)
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
    local key = bucket_key(names[j])
    if key then redis.pcall('DEL', key) end
    redis.pcall('HDEL', fill, names[j])
    total = total - sizes[j]
  end
end
return spans
