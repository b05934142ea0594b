--! include _retain
-- Shared by the scripts that save an iterable job's cursor (docs/architecture.md#iterable).
-- One hash per job: cursor (JSON), done (items done so far, over all its runs), at,
-- identity, state. Items done only grow: a write with fewer than the stored count is an
-- older run's (a process that could not yet know it was replaced) and is skipped, so a
-- stale process never overwrites a newer checkpoint. Returns 1 if written, 0 if skipped.
-- index, max: the checkpoints' index (retained:checkpoints) and the most kept (status_max),
-- or nil (no count bound). A trimmed checkpoint of a job still running is written again at
-- its next checkpoint; a suspended or failed job's payload carries its cursor anyway.
-- shed_key: the key of each name the trim sheds (the including script's declared_shed,
-- _declared.lua: checkpoint_needs asked for them before any write).
local function checkpoint_needs(key, done, index, max, shed_key)
  local stored = tonumber(redis.pcall("HGET", key, "done") or "-1") or -1
  if index and tonumber(done) >= stored then retain_needs(index, {key}, max, shed_key) end
end

local function save_checkpoint(key, done, cursor, ttl, identity, now, state, index, max, shed_key)
  local stored = tonumber(redis.call("HGET", key, "done") or "-1") or -1
  if tonumber(done) < stored then
    return 0
  end
  redis.call("HSET", key, "cursor", cursor, "done", done, "at", now, "identity", identity, "state", state)
  redis.call("EXPIRE", key, math.max(1, math.floor(tonumber(ttl))))
  if index then retain(index, key, now, max, ttl, shed_key) end
  return 1
end
