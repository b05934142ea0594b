--! include _declared
-- A batch's record, open (docs/architecture.md#batches), indexed, and the index bounded.
-- KEYS[1] = record: the batch's record
-- KEYS[2] = index: the index (batches)
-- KEYS[3] = created: the created counter
-- KEYS[4..] = declared(key): the records ("batch:<bid>") and jobs ("batch_jobs:<bid>") of
-- batches the trim may drop (_declared.lua), each named by the ARGV beside it
-- ARGV[1] = bid: the batch's id
-- ARGV[2] = now: epoch s
-- ARGV[3] = ttl: the record's TTL while it lasts (s)
-- ARGV[4] = most: most batches indexed
-- ARGV[5] = oldest: oldest kept in the index (epoch s)
-- ARGV[6..] = declared(name): the names of KEYS[4..], in order
-- ARGV[6+n..] = fields: after the n names, the record's fields and values
-- The index is trimmed here: by age, then by count (oldest first); a trimmed batch loses
-- its record and jobs too, done or not: the index's bound is the records' (an abandoned
-- batch, never closed or with jobs that never settle, would otherwise stay its whole TTL
-- beyond it). An unfinished batch trimmed so fires no callback: its jobs' settlements
-- report it gone. Returns 1, or 0 if the record existed (nothing written), or {0,
-- "need", name...} (nothing written) if a batch the trim may drop wasn't given.
if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
declare(6, #KEYS - 3)
-- The batches the trim may drop, asked for before any write: those aged out, and by
-- count at most the first (card + 2 - most) of the index as it is (the aged ones rank
-- first, and this one adds at most one); this one too if it could be among them.
local card, most = redis.call("ZCARD", KEYS[2]), tonumber(ARGV[4])
local function ask(bid)
  declared_key("batch", bid)
  declared_key("batch_jobs", bid)
end
for _, bid in ipairs(redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])) do ask(bid) end
if card + 2 - most > 0 then
  for _, bid in ipairs(redis.call("ZRANGE", KEYS[2], 0, card + 1 - most)) do ask(bid) end
end
if tonumber(ARGV[2]) < tonumber(ARGV[5]) or redis.call("ZCOUNT", KEYS[2], "-inf", ARGV[2]) < card + 2 - most then
  ask(ARGV[1])
end
local need = needs_reply()
if need then return need end
local fields = {}
for i = 6 + #KEYS - 3, #ARGV do table.insert(fields, ARGV[i]) end
redis.call("HSET", KEYS[1], "open", "1", "total", 0, "pending", 0, "succeeded", 0, "dead", 0,
           "cancelled", 0, "created_at", ARGV[2], unpack(fields))
redis.call("EXPIRE", KEYS[1], ARGV[3])
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
redis.pcall("INCR", KEYS[3])
local function drop(bid)
  redis.call("DEL", declared_key("batch", bid), declared_key("batch_jobs", bid))
end
for _, bid in ipairs(redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])) do drop(bid) end
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. ARGV[5])
local over = redis.call("ZCARD", KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  for _, bid in ipairs(redis.call("ZRANGE", KEYS[2], 0, over - 1)) do drop(bid) end
  redis.call("ZREMRANGEBYRANK", KEYS[2], 0, over - 1)
end
return 1
