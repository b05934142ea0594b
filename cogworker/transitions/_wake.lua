-- Shared by the scripts that put jobs on queues: tells workers of several queues, who
-- block on this stream rather than on one queue, that there is work. Capped, and
-- best-effort (pcall): a wake key of the wrong type must never stop a job's move.
local function wake(key)
  if key and key ~= "" then
    redis.pcall("XADD", key, "MAXLEN", "~", 100, "*", "w", "1")
  end
end
