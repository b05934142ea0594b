-- Moves due entries of a sorted set (schedule or retry) onto their queues.
-- KEYS[1] = the sorted set, KEYS[2] = the known-queues set, KEYS[3] = dead.
-- ARGV[1] = now (epoch s), ARGV[2] = batch size, ARGV[3] = queue key prefix,
-- ARGV[4] = default queue, ARGV[5] = now as a dead score.
-- Returns {moved, unreadable}. The payload is pushed exactly as stored (re-encoding it
-- in Lua would round big numbers). An entry that is not a job object goes to dead with
-- the reason, rather than being retried forever.
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[2]))
local moved, bad = 0, 0
for _, job in ipairs(due) do
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["class"]) == "string" then
    local queue = ARGV[4]
    if type(decoded["queue"]) == "string" and decoded["queue"] ~= "" then
      queue = decoded["queue"]
    end
    redis.call("LPUSH", ARGV[3] .. queue, job)
    redis.call("SADD", KEYS[2], queue)
    moved = moved + 1
  else
    local entry = cjson.encode({error_class = "cogworker.BadPayload",
      error_message = "scheduled entry is not a job object", failed_at = tonumber(ARGV[5]),
      raw_payload = job})
    redis.call("ZADD", KEYS[3], ARGV[5], entry)
    bad = bad + 1
  end
  redis.call("ZREM", KEYS[1], job)
end
return {moved, bad}
