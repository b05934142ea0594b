-- Shared by the scripts that save an iterable job's cursor (docs/architecture.md#iterable).
-- One hash per job: cursor (JSON), done (items done so far, over all its runs), at,
-- identity, state. Items done only grow: a write with fewer than the stored count is an
-- older run's (a process that could not yet know it was replaced) and is skipped, so a
-- stale process never overwrites a newer checkpoint. Returns 1 if written, 0 if skipped.
local function save_checkpoint(key, done, cursor, ttl, identity, now, state)
  local stored = tonumber(redis.call("HGET", key, "done") or "-1") or -1
  if tonumber(done) < stored then
    return 0
  end
  redis.call("HSET", key, "cursor", cursor, "done", done, "at", now, "identity", identity, "state", state)
  redis.call("EXPIRE", key, math.max(1, math.floor(tonumber(ttl))))
  return 1
end
