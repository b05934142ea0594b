--! include _retain
--! include _declared
-- A running job's progress (docs/architecture.md#cancel): its record, and its key in the
-- progress index, trimmed to the most kept (_retain.lua).
-- KEYS[1] = record_key: progress:<jid>
-- KEYS[2] = index: the index (retained:progress)
-- KEYS[3..] = declared(key): the progress keys the index's trim sheds, named by the index
-- ("key:<the key>", _declared.lua)
-- ARGV[1] = record: the record (JSON)
-- ARGV[2] = ttl: its TTL (s)
-- ARGV[3] = now: epoch s
-- ARGV[4] = keep: the most kept (status_max)
-- ARGV[5..] = declared(name): the declared keys' names, in their order
-- Returns 1, or {0, "need", name...} (nothing written) when the trim sheds keys not declared.
declare(5)
retain_needs(KEYS[2], {KEYS[1]}, ARGV[4], declared_shed)
local need = needs_reply()
if need then return need end
redis.call("SET", KEYS[1], ARGV[1], "EX", ARGV[2])
retain(KEYS[2], KEYS[1], ARGV[3], ARGV[4], ARGV[2], declared_shed)
return 1
