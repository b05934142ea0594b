--! include _push_job
-- A periodic slot's job onto its queue, with the slot's "pushed" mark in the same step
-- (docs/architecture.md#periodic): a push whose reply is lost may have landed, and the mark
-- is how the ticker's next claim of that slot knows, instead of pushing it a second time.
-- KEYS[1] = queue_key: as in push.lua
-- KEYS[2] = queues: as in push.lua
-- KEYS[3] = wake: as in push.lua
-- KEYS[4..] = status(bucket): as in push.lua
-- KEYS[#KEYS] = mark: the slot's pushed mark
-- ARGV[1] = job: as in push.lua
-- ARGV[2] = queue: as in push.lua
-- ARGV[3..] = status(jid, record, ttl): as in push.lua
-- ARGV[#ARGV - 1] = jid: the jid
-- ARGV[#ARGV] = mark_ttl: the mark's TTL (s, the slot lock's). The mark is a SET,
-- which no key's type can refuse, so a landed push always leaves it.
-- A mark there already (any jid: the key is this slot's) means the slot was pushed: the job
-- isn't pushed again, and the reply is the jid it was pushed as. In the cluster's queue
-- layout the mark lives in the queue's part, apart from the claim (the fleet's), so the
-- ticker's reclaim and rollback read it in a call of their own; this refusal is what keeps
-- a slot pushed at most once whatever lands between that read and a second push.
local marked = redis.pcall("GET", KEYS[#KEYS])
if type(marked) == "string" then
  return marked
end
local n = push_job(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
redis.call("SET", KEYS[#KEYS], ARGV[#ARGV - 1], "EX", ARGV[#ARGV])
if #KEYS == 5 then queued_status(KEYS[4], ARGV[3], ARGV[4], ARGV[5]) end
return n
