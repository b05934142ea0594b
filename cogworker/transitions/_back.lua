-- Shared by the scripts that put one job the caller knows back on its queue: the caller
-- read the queue and the unique lock from the payload and passes their keys (the keys
-- are declared; _requeue_job.lua is the same step for jobs only Redis holds).
-- RPUSH: the end fetch takes from, so a job handed back runs next. A unique job keeps
-- its lock while it waits to run again: the lock's TTL is renewed if (and only if) this
-- job still owns it.
local function requeue_into(job, queue, wake_key, lock)
  redis.call("RPUSH", queue, job)
  wake(wake_key)
  if lock then
    local ok, decoded = pcall(cjson.decode, job)
    if ok and type(decoded) == "table" and tonumber(decoded["unique_for"]) then
      if redis.pcall("GET", lock) == decoded["jid"] then
        redis.pcall("EXPIRE", lock, math.max(1, math.floor(tonumber(decoded["unique_for"]))))
      end
    end
  end
end
