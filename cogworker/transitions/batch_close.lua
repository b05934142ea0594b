--! include _wake
--! include _workflow
--! include _batch
-- The `with cogworker.batch(...)` block ended: the batch is closed, and whatever is due
-- fires now (every job already settled, or none joined) (docs/architecture.md#batches).
-- KEYS[1] = record: the batch's record
-- KEYS[2] = jobs: the batch's jobs
-- KEYS[3] = queues: the known-queues set (a callback pushed)
-- KEYS[4] = wake: the wake stream
-- KEYS[5] = batch_callbacks: the batch callbacks pushed, ever (a counter)
-- KEYS[6..] = declared(key): the keys of the callbacks it fires, read from the record (their
-- queues, unique locks: _declared.lua), asked for by a {0, "need", name...} reply
-- ARGV[1] = now: epoch s
-- ARGV[2..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Returns {1 or 0 (no such batch), errors...}, or {0, "need", name...}, nothing written;
-- a second close changes nothing.
if redis.call("EXISTS", KEYS[1]) == 0 then return {0} end
declare(2)
wf_queues, wf_wake, batch_callbacks_key = KEYS[3], KEYS[4], KEYS[5]
batch_check_needs(KEYS[1], nil, true)
local need = needs_reply()
if need then return need end
redis.call("HDEL", KEYS[1], "open")
redis.call("HSETNX", KEYS[1], "closed_at", ARGV[1])
local errs = {}
batch_check_at(KEYS[1], KEYS[2], ARGV[1], errs)
local reply = {1}
for _, e in ipairs(errs) do table.insert(reply, e) end
return reply
