-- Shared by the scripts that put a job back on its queue. The queue comes from the
-- payload (an unreadable payload goes to the default queue rather than being lost).
-- RPUSH: the end fetch takes from, so a job handed back runs next.
-- A unique job keeps its lock while it waits to run again: the lock's TTL is renewed
-- if (and only if) this job still owns it.
local function requeue_job(job, queue_prefix, default_queue, unique_prefix)
  local queue = default_queue
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" then
    if type(decoded["queue"]) == "string" and decoded["queue"] ~= "" then
      queue = decoded["queue"]
    end
  else
    decoded = nil
  end
  redis.call("RPUSH", queue_prefix .. queue, job)
  wake((string.gsub(queue_prefix, "queue:$", "wake"))) -- "<ns>:queue:" -> "<ns>:wake"
  if decoded and type(decoded["unique_digest"]) == "string" and tonumber(decoded["unique_for"]) then
    local lock = unique_prefix .. decoded["unique_digest"]
    if redis.pcall("GET", lock) == decoded["jid"] then
      redis.pcall("EXPIRE", lock, math.max(1, math.floor(tonumber(decoded["unique_for"]))))
    end
  end
end
