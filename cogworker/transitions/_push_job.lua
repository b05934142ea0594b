--! include _wake
-- Shared by push.lua and periodic_push.lua: one job onto its queue, the known-queues set,
-- and the wake stream only when this push made the queue non-empty (see push.lua).
local function push_job(queue, queues, wake_key, job, name)
  local n = redis.call("LPUSH", queue, job)
  redis.pcall("SADD", queues, name)
  if n == 1 then wake(wake_key) end
  return n
end

-- The job's queued status in enq:<hour> (ttl '' = set already). Best-effort (pcall): a key
-- of the wrong type there must not make a written job look unwritten.
local function queued_status(bucket, jid, record, ttl)
  if bucket and type(redis.pcall("HSET", bucket, jid, record)) == "number" and ttl ~= "" then
    redis.pcall("EXPIRE", bucket, ttl)
  end
end
