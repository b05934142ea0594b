--! include _wake
--! include _requeue_job
--! include _fence
-- Puts a whole in-progress list back on its queues: a dead process's (orphan recovery,
-- a dead child) or a stopping process's own.
-- KEYS[1] = the in-progress list, KEYS[2] = its owner's process key, KEYS[3] = last_beat,
-- KEYS[4] = repeat_orphans, KEYS[5] = dead, KEYS[6] = the owner's fence.
-- ARGV[1] = queue key prefix, ARGV[2] = default queue, ARGV[3] = unique lock prefix,
-- ARGV[4] = owner identity, ARGV[5] = whose requeue it is:
--   "own": the owner's, as it stops (refused, FENCED, if it was declared dead);
--   "reclaim": its master's, the owner being dead for sure (reaped): fenced if anything is listed;
--   "dead:<beat>": orphan recovery's, which watched the owner's beat stay at <beat> ("none":
--   no beat) for the orphan threshold. Done only if it still is, with no process key;
-- ARGV[6] = the caller's clock (epoch s),
-- ARGV[7] = orphan counter prefix, ARGV[8] = its TTL, ARGV[9] = max orphanings,
-- ARGV[10] = "*" to count an orphaning per job, "j:<jid>" for that job only (the one
-- its owner ran: the others never started; several jids, one a line, for an owner with
-- several jobs in flight), "" for none; ARGV[11..] = "d:<job>" (finished, only
-- the ack is missing: dropping it is the ack) or "k:<job>" (leave it on the list).
-- Returns {moved, 1 if this fenced the owner (0 if it already was or it is "own"), {jobs
-- filed raw in dead...}, {"c", "u" or "p", job, ...}}, or {-1} if the owner turned out alive.
-- The last list (empty in mode "own") names every job taken off a gone owner's list and
-- requeued or parked, "c" if an orphaning was counted for it, "p" if it was counted and
-- parked past the limit (it goes to dead): the caller fires `orphaned`.
-- Anyone else's requeue fences the owner first: if it wakes up, every script it runs is
-- refused, so it can't run or settle the copies it still holds while theirs run elsewhere.
local was_fenced = redis.call("EXISTS", KEYS[6]) == 1
if ARGV[5] == "own" then
  if was_fenced then return fenced(KEYS[6]) end
elseif ARGV[5] ~= "reclaim" then
  -- Checked here, atomically with the requeue: checked separately, an owner that beat
  -- in between would lose jobs it is still running to a second run.
  if redis.call("EXISTS", KEYS[2]) == 1 then
    return {-1}
  end
  local last = redis.pcall("HGET", KEYS[3], ARGV[4])
  if type(last) ~= "string" then last = "none" end -- none, or unreadable (wrong type)
  if ARGV[5] ~= "dead:" .. last then
    return {-1}
  end
end
local fenced_now = 0
-- A reaped child with nothing listed (a clean exit, recycling) needs no tombstone.
if ARGV[5] ~= "own" and not was_fenced and (ARGV[5] ~= "reclaim" or redis.call("LLEN", KEYS[1]) > 0) then
  redis.call("SET", KEYS[6], ARGV[6], "EX", 7 * 24 * 3600)
  fenced_now = 1
end
local finished, keep = {}, {}
for i = 11, #ARGV do
  local mark, payload = string.sub(ARGV[i], 1, 2), string.sub(ARGV[i], 3)
  if mark == "d:" then finished[payload] = true else keep[payload] = true end
end
local moved, kept, buried, orphaned = 0, {}, {}, {}
local counted = {} -- "j:<jid>\n<jid>...": the jobs its owner was running
if string.sub(ARGV[10], 1, 2) == "j:" then
  for jid in string.gmatch(string.sub(ARGV[10], 3), "[^\n]+") do counted[jid] = true end
end
-- One pass over the list as it stands, newest (the head) first: each goes to the fetch
-- end of its queue, so the oldest lands last, nearest that end, and runs first. Each job is peeked, written where it goes, and only then removed: a script
-- stopped by an error keeps the writes made before it, so popping first would lose the
-- job. A job whose requeue fails (its queue key of the wrong type) goes to the tail
-- instead, so it can't hold up the rest; it is retried on the next pass.
for _ = 1, redis.call("LLEN", KEYS[1]) do
  local job = redis.call("LINDEX", KEYS[1], 0)
  if not job then break end
  if finished[job] then
    redis.call("LPOP", KEYS[1])
    local ok, decoded = pcall(cjson.decode, job)
    if ok and type(decoded) == "table" and type(decoded["jid"]) == "string" then
      redis.pcall("DEL", ARGV[7] .. decoded["jid"])
    end
  elseif keep[job] then
    table.insert(kept, redis.call("LPOP", KEYS[1]))
  else
    local counter, parked = nil, false
    if ARGV[10] ~= "" then
      local ok, decoded = pcall(cjson.decode, job)
      if ok and type(decoded) == "table" and type(decoded["jid"]) == "string"
          and (ARGV[10] == "*" or counted[decoded["jid"]]) then
        counter = ARGV[7] .. decoded["jid"]
        local current = redis.pcall("GET", counter)
        local count = type(current) == "string" and tonumber(current) or nil
        if count == nil and current then
          redis.pcall("DEL", counter) -- unusable: start over rather than switch the limit off
        end
        count = (count or 0) + 1
        if count > tonumber(ARGV[9]) then
          parked = type(redis.pcall("RPUSH", KEYS[4], job)) == "number"
          if not parked then
            -- Parking list unusable: straight to dead, raw; the caller completes it.
            parked = type(redis.pcall("ZADD", KEYS[5], ARGV[6], job)) == "number"
            if parked then table.insert(buried, job) end
          end
        end
      end
    end
    local written = parked or pcall(requeue_job, job, ARGV[1], ARGV[2], ARGV[3])
    redis.call("LPOP", KEYS[1])
    if written then
      if counter and not parked then
        redis.pcall("INCR", counter)
        redis.pcall("EXPIRE", counter, ARGV[8])
      end
      moved = moved + 1
      if ARGV[5] ~= "own" then
        table.insert(orphaned, parked and "p" or counter and "c" or "u")
        table.insert(orphaned, job)
      end
    else
      redis.call("RPUSH", KEYS[1], job)
    end
  end
end
for _, job in ipairs(kept) do
  redis.call("RPUSH", KEYS[1], job)
end
return {moved, fenced_now, buried, orphaned}
