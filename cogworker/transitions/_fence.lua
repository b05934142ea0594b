-- Shared by the scripts a process runs for its own identity. A process is fenced once
-- someone requeued its list (it was declared dead): whatever it asks is refused, so one
-- that wakes from a freeze can't fetch, ack or file against a list taken from it.
local function fenced(key)
  if redis.call("EXISTS", key) == 1 then
    return redis.error_reply("FENCED " .. (string.match(key, ":fenced:(.*)$") or key))
  end
  return nil
end

-- The process's beat, by Redis's clock, in a script it runs anyway (no round trip of its
-- own). Orphan recovery only asks whether this value changed. Best-effort (pcall): a
-- last_beat of the wrong type must never stop a job's move.
local function beat(last_beat, identity)
  if identity and identity ~= "" then
    local t = redis.call("TIME")
    redis.pcall("HSET", last_beat, identity, t[1] .. "." .. string.format("%06d", tonumber(t[2])))
  end
end
