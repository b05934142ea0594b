--! include _push_job
-- A periodic slot's job onto its queue, with the slot's "pushed" mark in the same step
-- (docs/architecture.md#periodic): a push whose reply is lost may have landed, and the mark
-- is how the ticker's next claim of that slot knows, instead of pushing it a second time.
-- KEYS[1] = the queue, KEYS[2] = the known-queues set, KEYS[3] = the wake stream,
-- KEYS[4] = the slot's pushed mark; ARGV[1] = the job, ARGV[2] = the queue's name,
-- ARGV[3] = the jid, ARGV[4] = the mark's TTL (s, the slot lock's).
-- With job status on: KEYS[5] = enq:<hour>, ARGV[5] = its record, ARGV[6] = the bucket's
-- TTL ('' = set already). Side writes are best-effort (pcall), as in push.lua; the mark is
-- a SET, which no key's type can refuse, so a landed push always leaves it.
local n = push_job(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
redis.call("SET", KEYS[4], ARGV[3], "EX", ARGV[4])
queued_status(KEYS[5], ARGV[3], ARGV[5], ARGV[6])
return n
