-- A job's priority level (docs/architecture.md#priorities): the suffix that names its
-- level's list after its queue's name (keys.level_name: a space, then the priority), ""
-- at 0. Its level is in the levels set already: every enqueue of a job of a priority
-- adds it there first, and that set is never trimmed. A priority that breaks the rule
-- (another client's) is 0: the job waits on its queue rather than on no list read.
local function level_suffix(decoded)
  local p = decoded["priority"]
  if type(p) == "number" and p ~= 0 and p == math.floor(p) and p >= -100 and p <= 100 then
    return " " .. string.format("%d", p)
  end
  return ""
end
