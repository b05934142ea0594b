-- A batch's record, open (docs/architecture.md#batches), indexed, and the index bounded.
-- KEYS[1] = the record, KEYS[2] = the index (batches), KEYS[3] = the created counter.
-- ARGV[1] = bid, ARGV[2] = now, ARGV[3] = the record's TTL while it lasts (s),
-- ARGV[4] = most batches indexed, ARGV[5] = oldest kept in the index (epoch s),
-- ARGV[6] = the namespace prefix, ARGV[7..] = the record's fields and values.
-- The index is trimmed here: by age, then by count (oldest first); a trimmed batch that
-- is done loses its record and jobs too (one still running keeps them until its TTL, so
-- its callbacks still fire). Returns 1, or 0 if the record existed (nothing written).
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 7, #ARGV do table.insert(fields, ARGV[i]) end
redis.call("HSET", KEYS[1], "open", "1", "total", 0, "pending", 0, "succeeded", 0, "dead", 0,
           "cancelled", 0, "created_at", ARGV[2], unpack(fields))
redis.call("EXPIRE", KEYS[1], ARGV[3])
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
redis.pcall("INCR", KEYS[3])
local function drop(bid)
  local b = ARGV[6] .. "batch:{" .. bid .. "}"
  if redis.call("EXISTS", b) == 1 and redis.call("HEXISTS", b, "done_at") == 1 then
    redis.call("DEL", b, ARGV[6] .. "batch_jobs:{" .. bid .. "}")
  end
end
for _, bid in ipairs(redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])) do drop(bid) end
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
local over = redis.call("ZCARD", KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  for _, bid in ipairs(redis.call("ZRANGE", KEYS[2], 0, over - 1)) do drop(bid) end
  redis.call("ZREMRANGEBYRANK", KEYS[2], 0, over - 1)
end
return 1
