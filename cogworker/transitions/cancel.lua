--! include _wake
--! include _workflow
--! include _batch
--! include _retain
-- An operator's cancel of one job, checked in the same step against where it was read
-- (docs/architecture.md#cancel). Whatever touches the entry first wins: a fetch, the
-- poller, an ack, a filing, a requeue, or this. Write first (the mark), remove second.
-- KEYS[1] = where: where it was read: a queue or an in-progress list (kind "list"), or
-- schedule/retry (kind "zset")
-- KEYS[2] = mark_key: its mark (cancelled:<jid>)
-- KEYS[3] = counter: the cancel counter
-- KEYS[4] = lock: its unique lock, or any key of the namespace ("" owner)
-- KEYS[5] = ahead: the look-ahead records
-- KEYS[6] = index: the cancel marks' index (retained:cancelled)
-- KEYS[7] = queues: the known-queues set (a callback pushed)
-- KEYS[8] = wake: the wake stream
-- KEYS[9] = results_index: the kept results' index (retained:results)
-- KEYS[10] = batch_callbacks: the batch callbacks pushed, ever (a counter)
-- KEYS[11..] = declared(key): the keys named by data (_declared.lua, as file.lua's)
-- ARGV[1] = kind: "list" or "zset"
-- ARGV[2] = entry: the entry (exact bytes)
-- ARGV[3] = mark: the mark (JSON)
-- ARGV[4] = ttl: the mark's TTL (s)
-- ARGV[5] = lock_owner: the unique lock's owner (the jid) or ""
-- ARGV[6] = list_owner: the list's owner (an in-progress list) or ""
-- ARGV[7] = workflows: "1": a job of a batch counts there as cancelled, and a job of a
-- group or chain settles there as failed (cogworker.Cancelled), in this step; "": not
-- looked at
-- ARGV[8] = now: epoch s
-- ARGV[9] = keep: the most cancel marks (and results) kept (status_max)
-- ARGV[10..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Returns 1 if cancelled, 0 if the entry was no longer there, {0, "need", name...} (nothing
-- written) for keys to declare.
local kind, entry = ARGV[1], ARGV[2]
local at
if kind == "zset" then
  if not redis.call("ZSCORE", KEYS[1], entry) then return 0 end
elseif kind == "list" then
  at = redis.call("LPOS", KEYS[1], entry)
  if not at then return 0 end
else
  return redis.error_reply("unknown kind " .. kind)
end
declare(10)
wf_results_index, wf_queues, wf_wake, batch_callbacks_key = KEYS[9], KEYS[7], KEYS[8], KEYS[10]
local settles = ARGV[7] and ARGV[7] ~= ""
retain_needs(KEYS[6], {KEYS[2]}, ARGV[9], declared_shed)
if settles then
  wf_dead_needs(entry)
  local bid, jid = batch_of(entry)
  if bid then batch_settle_needs(bid, jid, "cancelled") end
  wf_retain_needs(ARGV[9])
end
local need = needs_reply()
if need then return need end
if kind == "list" and ARGV[6] ~= "" then
  -- A look-ahead record counts the top n - t entries of its owner's list as that
  -- fetch's (take_ahead/return_ahead pop them by position). Removing one of them
  -- would shift a started job into that count, so the record goes first: nobody can
  -- take or return by position any more (the owner keeps its held jobs; one it does
  -- not start stays listed, for reconcile or its exit to requeue).
  local record = redis.call("HGET", KEYS[5], ARGV[6])
  if record then
    local n, t = string.match(record, "^%d+:(%d+):(%d+)$")
    local protected = n and (tonumber(n) - tonumber(t)) or 1
    if at < protected then redis.call("HDEL", KEYS[5], ARGV[6]) end
  end
end
redis.call("SET", KEYS[2], ARGV[3], "EX", ARGV[4])
retain(KEYS[6], KEYS[2], ARGV[8], ARGV[9], ARGV[4], declared_shed)
redis.pcall("INCR", KEYS[3])
if ARGV[5] ~= "" and redis.pcall("GET", KEYS[4]) == ARGV[5] then
  redis.pcall("DEL", KEYS[4])
end
if kind == "zset" then
  redis.call("ZREM", KEYS[1], entry)
else
  redis.call("LREM", KEYS[1], 1, entry)
end
if settles then
  wf_keep = ARGV[9]
  wf_cancelled(entry, ARGV[8], {})
  local bid, jid = batch_of(entry)
  if bid then batch_settle(bid, jid, "cancelled", ARGV[8], {}) end
end
return 1
