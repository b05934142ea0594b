--! include _wake
--! include _dead
-- Files the head of a hand-over list in a sorted set, then removes it: a parked repeat
-- orphan into dead, or an unsettled failure record into retry/dead.
-- KEYS[1] = list: the list (repeat_orphans or unsettled)
-- KEYS[2] = zset: the sorted set
-- KEYS[3] = queues: the known-queues set (a callback pushed)
-- KEYS[4] = wake: the wake stream
-- KEYS[5] = results_index: the kept results' index (retained:results)
-- KEYS[6] = batch_callbacks: the batch callbacks pushed, ever (a counter)
-- KEYS[7..] = declared(key): filing in dead, the keys named by data (_declared.lua, as file.lua's)
-- ARGV[1] = head: the entry expected at the head (the caller walks the list in order;
-- someone else may have taken it meanwhile: then 0)
-- ARGV[2] = score: its score
-- ARGV[3] = filed: what to file
-- ARGV[4] = workflows: filing in dead, "1": a job of a workflow or batch settles there
-- too (_workflow.lua, _batch.lua); else ""
-- ARGV[5] = now: epoch s
-- ARGV[6] = keep: the most results kept (status_max)
-- ARGV[7..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Returns 1, 0, or {0, "need", name...}, nothing written: keys to declare.
if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
declare(7)
dead_keys(KEYS[3], KEYS[4], KEYS[5], KEYS[6])
local settles = ARGV[4] and ARGV[4] ~= ""
if settles then
  local need = dead_needs(ARGV[3], ARGV[6])
  if need then return need end
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
if settles then
  dead_settle(ARGV[3], ARGV[5], ARGV[6], {})
end
redis.call("LPOP", KEYS[1])
return 1
