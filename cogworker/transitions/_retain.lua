-- Shared by the scripts that write a per-job key outside the status flush: progress,
-- cancel marks, checkpoints, kept results (docs/architecture.md#retention). Each kind has
-- an index, a sorted set of its keys' names by when each was last written, trimmed here,
-- in the script that writes: no scan, no call of its own. Once the index holds more than
-- max plus a group (a hundredth of max, at least 1), the oldest go, with their keys, down
-- to max: so most writes cost a ZADD, a ZCARD and a TTL, and the trim's DEL comes once a
-- group. At most a group plus SLACK go per write, so a lowered max catches up over a few
-- writes rather than in one long call. The index lives as long as the longest-lived key
-- written into it (ttl, s): with no writes, it expires with them.
-- max absent, 0 or not a number: no count bound (a caller of an older version).
-- shed_key: the key each name shed is, or nil (not deleted: it expires by its TTL): every
-- including script deletes only keys it was given (_declared.lua's declared_shed, the
-- names asked for first by retain_needs).
local RETAIN_SLACK = 100

local function retain(index, key, now, max, ttl, shed_key)
  max = tonumber(max)
  if not max or max < 1 then return end
  redis.pcall("ZADD", index, now, key)
  local left = redis.pcall("TTL", index)
  ttl = math.max(1, math.floor(tonumber(ttl) or 1))
  if type(left) ~= "number" or left < ttl then redis.pcall("EXPIRE", index, ttl) end
  local size = redis.pcall("ZCARD", index)
  local group = math.max(1, math.floor(max / 100))
  if type(size) ~= "number" or size <= max + group then return end
  local shed = redis.pcall("ZPOPMIN", index, math.min(size - max, group + RETAIN_SLACK))
  if type(shed) ~= "table" then return end
  local keys = {}
  for j = 1, #shed, 2 do
    local name = shed[j]
    name = shed_key(name)
    if name then keys[#keys + 1] = name end
  end
  if #keys > 0 then redis.pcall("DEL", unpack(keys)) end
end

-- Before a script's writes: the names retain(index, add, now, max, ...) may shed, for each
-- add of adds in turn, each passed to need (a superset: the lowest of the index, as many
-- as the sheds take plus the adds, which may displace some). Nothing when no shed comes.
local function retain_needs(index, adds, max, need)
  max = tonumber(max)
  if not max or max < 1 or #adds == 0 then return end
  local size = redis.pcall("ZCARD", index)
  if type(size) ~= "number" then return end
  local group, taken = math.max(1, math.floor(max / 100)), 0
  -- Not full even if every add is new: no shed, and no ZSCORE per add to learn it.
  if size + #adds <= max + group then return end
  for _, key in ipairs(adds) do
    if type(redis.pcall("ZSCORE", index, key)) ~= "string" then size = size + 1 end
    if size > max + group then
      local n = math.min(size - max, group + RETAIN_SLACK)
      taken, size = taken + n, size - n
    end
  end
  if taken == 0 then return end
  local lowest = redis.pcall("ZRANGE", index, 0, taken + #adds - 1)
  if type(lowest) ~= "table" then return end
  for _, name in ipairs(lowest) do need(name) end
end
