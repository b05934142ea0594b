--! include _wake
--! include _workflow
--! include _batch
-- The `with cogworker.batch(...)` block ended: the batch is closed, and whatever is due
-- fires now (every job already settled, or none joined) (docs/architecture.md#batches).
-- KEYS[1] = the record. ARGV[1] = the namespace prefix, ARGV[2] = bid, ARGV[3] = now.
-- Returns {1 or 0 (no such batch), errors...}; a second close changes nothing.
if redis.call("EXISTS", KEYS[1]) == 0 then return {0} end
redis.call("HDEL", KEYS[1], "open")
redis.call("HSETNX", KEYS[1], "closed_at", ARGV[3])
local errs = {}
batch_check(ARGV[1], ARGV[2], ARGV[3], errs)
local reply = {1}
for _, e in ipairs(errs) do table.insert(reply, e) end
return reply
