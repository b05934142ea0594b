--! include _wake
-- retry_all in chunks: the first ARGV[2] entries of a sorted set (after skipping
-- ARGV[1] that an earlier call could not move) onto their queues now, each written
-- first and removed second. An entry that is not a job object stays where it is (an
-- operator deletes it) and is counted as skipped, so the next call steps over it.
-- KEYS[1] = the sorted set, KEYS[2] = the known-queues set, KEYS[3] = wake.
-- ARGV[1] = entries to skip, ARGV[2] = chunk size, ARGV[3] = queue key prefix,
-- ARGV[4] = default queue.
-- Returns {moved, skipped, entries read}.
local batch = redis.call("ZRANGE", KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1)
local moved, skipped = 0, 0
for _, job in ipairs(batch) do
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["class"]) == "string" then
    local queue = ARGV[4]
    if type(decoded["queue"]) == "string" and decoded["queue"] ~= "" then queue = decoded["queue"] end
    local pushed = redis.pcall("LPUSH", ARGV[3] .. queue, job)
    if type(pushed) == "number" then
      redis.pcall("SADD", KEYS[2], queue)
      redis.call("ZREM", KEYS[1], job)
      moved = moved + 1
    else
      skipped = skipped + 1
    end
  else
    skipped = skipped + 1
  end
end
if moved > 0 then wake(KEYS[3]) end
return {moved, skipped, #batch}
