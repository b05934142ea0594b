-- A look-ahead record in the `ahead` hash (docs/architecture.md#lookahead-k): identity ->
-- "<fetch number>" (one job, written by fetch.lua) or "<number>:<n>:<t>" (fetch_ahead.lua:
-- n jobs fetched, t of them taken over since). The jobs not started are the top
-- n - t - s entries of the owner's list, s being how many the owner started (its slot
-- says, read under its lock). Returns number, n, t; nil when there is no record.
local function ahead_record(hash, identity)
  local value = redis.call("HGET", hash, identity)
  if not value then return nil, 0, 0 end
  local number, n, t = string.match(value, "^([^:]+):(%d+):(%d+)$")
  if number then return number, tonumber(n), tonumber(t) end
  return value, 1, 0
end
