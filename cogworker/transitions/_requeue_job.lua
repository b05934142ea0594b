--! include _level
-- Shared by the scripts that put a job back on its queue (each includes _declared first).
-- The queue comes from the payload (an unreadable payload goes to the default queue
-- rather than being lost). RPUSH: the end fetch takes from, so a job handed back runs next.
-- A unique job keeps its lock while it waits to run again: the lock's TTL is renewed
-- if (and only if) this job still owns it.
-- What names the keys a job's requeue writes (_declared.lua): its list (a queue or level
-- name, kind queue), its unique lock's digest (nil for a job that isn't unique), and its
-- payload decoded (nil: unreadable).
local function requeue_target(job, default_queue)
  local queue, decoded = default_queue, nil
  local ok, d = pcall(cjson.decode, job)
  if ok and type(d) == "table" then
    decoded = d
    if type(d["queue"]) == "string" and d["queue"] ~= "" then
      queue = d["queue"] .. level_suffix(d)
    end
  end
  local lock = nil
  if decoded and type(decoded["unique_digest"]) == "string" and tonumber(decoded["unique_for"]) then
    lock = decoded["unique_digest"]
  end
  return queue, lock, decoded
end
-- Asks for the keys requeue_job would write for job, before any write.
local function requeue_needs(job, default_queue)
  local list, lock = requeue_target(job, default_queue)
  declared_key("queue", list)
  if lock then declared_key("unique", lock) end
end
local function requeue_job(job, default_queue, wake_key)
  local list, lock, decoded = requeue_target(job, default_queue)
  redis.call("RPUSH", declared_key("queue", list), job)
  wake(wake_key)
  if lock then
    local key = declared_key("unique", lock)
    if redis.pcall("GET", key) == decoded["jid"] then
      redis.pcall("EXPIRE", key, math.max(1, math.floor(tonumber(decoded["unique_for"]))))
    end
  end
end
