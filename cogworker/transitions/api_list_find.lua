-- Looks for an entry of a list that contains the needle (plainly, no patterns), reading
-- count entries from index start: a list of any length is searched without loading it
-- into the caller, and without holding Redis for more than one chunk.
-- KEYS[1] = list: the list
-- ARGV[1] = start: the index to read from
-- ARGV[2] = count: how many entries to read
-- ARGV[3] = needle: what the entry contains
-- Returns {index of the match or -1, the entry or "", next index}.
local start, count = tonumber(ARGV[1]), tonumber(ARGV[2])
local chunk = redis.call("LRANGE", KEYS[1], start, start + count - 1)
for i, entry in ipairs(chunk) do
  if string.find(entry, ARGV[3], 1, true) then
    return {start + i - 1, entry, start + i}
  end
end
if #chunk < count then return {-1, "", -1} end
return {-1, "", start + count}
