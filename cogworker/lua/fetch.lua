-- Reliable fetch, with the previous job's ack riding along (one round trip per job).
-- KEYS[1] = in-progress list, KEYS[2] = orphan counter of the job being acked (or any
-- key of the namespace when there is none), KEYS[3..] = queues in the order to try.
-- ARGV[1] = the previous job to acknowledge, or "".
-- Returns {index of the queue, job} or {0, ""}; then the names of queue keys that
-- could not be read (wrong type), so the caller can log them: one bad key never stops
-- the other queues.
if ARGV[1] ~= "" then
  redis.call("LREM", KEYS[1], 1, ARGV[1])
  redis.pcall("DEL", KEYS[2])
end
local bad = {}
for i = 3, #KEYS do
  local job = redis.pcall("LMOVE", KEYS[i], KEYS[1], "RIGHT", "LEFT")
  if type(job) == "string" then
    local reply = {i - 2, job}
    for _, key in ipairs(bad) do table.insert(reply, key) end
    return reply
  elseif type(job) == "table" and job["err"] then
    table.insert(bad, KEYS[i])
  end
end
local reply = {0, ""}
for _, key in ipairs(bad) do table.insert(reply, key) end
return reply
