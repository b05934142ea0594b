--! include _wake
--! include _workflow
--! include _batch
-- An operator's cancel of one job, checked in the same step against where it was read
-- (docs/architecture.md#cancel). Whatever touches the entry first wins: a fetch, the
-- poller, an ack, a filing, a requeue, or this. Write first (the mark), remove second.
-- KEYS[1] = where it was read: a queue or an in-progress list (kind "list"), or
-- schedule/retry (kind "zset"); KEYS[2] = its mark (cancelled:<jid>); KEYS[3] = the
-- cancel counter; KEYS[4] = its unique lock, or any key of the namespace ("" owner);
-- KEYS[5] = the look-ahead records (ahead).
-- ARGV[1] = kind, ARGV[2] = the entry (exact bytes), ARGV[3] = the mark (JSON),
-- ARGV[4] = its TTL (s), ARGV[5] = the unique lock's owner (the jid) or "", ARGV[6] =
-- the list's owner (an in-progress list) or "", ARGV[7] = the namespace prefix and
-- ARGV[8] = now: a job of a batch counts there as cancelled, and a job of a group or
-- chain settles there as failed (cogworker.Cancelled), in this step (absent: not looked at).
-- Returns 1 if cancelled, 0 if the entry was no longer there.
local kind, entry = ARGV[1], ARGV[2]
if kind == "zset" then
  if not redis.call("ZSCORE", KEYS[1], entry) then return 0 end
elseif kind == "list" then
  local at = redis.call("LPOS", KEYS[1], entry)
  if not at then return 0 end
  if ARGV[6] ~= "" then
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
else
  return redis.error_reply("unknown kind " .. kind)
end
redis.call("SET", KEYS[2], ARGV[3], "EX", ARGV[4])
redis.pcall("INCR", KEYS[3])
if ARGV[5] ~= "" and redis.pcall("GET", KEYS[4]) == ARGV[5] then
  redis.pcall("DEL", KEYS[4])
end
if kind == "zset" then
  redis.call("ZREM", KEYS[1], entry)
else
  redis.call("LREM", KEYS[1], 1, entry)
end
if ARGV[7] and ARGV[7] ~= "" then
  wf_cancelled(ARGV[7], entry, ARGV[8], {})
  local bid, jid = batch_of(entry)
  if bid then batch_settle(ARGV[7], bid, jid, "cancelled", ARGV[8], {}) end
end
return 1
