--! include _wake
--! include _workflow
--! include _batch
-- Files the head of a hand-over list in a sorted set, then removes it: a parked repeat
-- orphan into dead, or an unsettled failure record into retry/dead.
-- KEYS[1] = the list (repeat_orphans or unsettled), KEYS[2] = the sorted set.
-- ARGV[4], ARGV[5] (filing in dead): the namespace prefix and now, for a job of a
-- workflow (_workflow.lua). ARGV[1] = the entry expected at the head (the caller walks the list in order; someone
-- else may have taken it meanwhile: then 0), ARGV[2] = score, ARGV[3] = what to file.
if redis.call("LINDEX", KEYS[1], 0) ~= ARGV[1] then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] and ARGV[4] ~= "" then
  wf_dead(ARGV[4], ARGV[3], ARGV[5], {})
  local bid, jid = batch_of(ARGV[3])
  if bid then batch_settle(ARGV[4], bid, jid, "dead", ARGV[5], {}) end
end
redis.call("LPOP", KEYS[1])
return 1
