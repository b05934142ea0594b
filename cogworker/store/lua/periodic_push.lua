--! include _wake
-- A periodic slot's job onto its queue, with the slot's "pushed" mark in the same step
-- (docs/architecture.md#periodic): a push whose reply is lost may have landed, and the mark
-- is how the ticker's next claim of that slot knows, instead of pushing it a second time.
-- KEYS[1] = the queue, KEYS[2] = the known-queues set, KEYS[3] = the wake stream,
-- KEYS[4] = the slot's pushed mark; ARGV[1] = the job, ARGV[2] = the queue's name,
-- ARGV[3] = the jid, ARGV[4] = the mark's TTL (s, the slot lock's).
-- With job status on: KEYS[5] = enq:<hour>, ARGV[5] = its record, ARGV[6] = the bucket's
-- TTL ('' = set already). Side writes are best-effort (pcall), as in push.lua; the mark is
-- a SET, which no key's type can refuse, so a landed push always leaves it.
local n = redis.call("LPUSH", KEYS[1], ARGV[1])
redis.call("SET", KEYS[4], ARGV[3], "EX", ARGV[4])
redis.pcall("SADD", KEYS[2], ARGV[2])
if n == 1 then wake(KEYS[3]) end
if KEYS[5] and type(redis.pcall("HSET", KEYS[5], ARGV[3], ARGV[5])) == "number" and ARGV[6] ~= "" then
  redis.pcall("EXPIRE", KEYS[5], ARGV[6])
end
return n
