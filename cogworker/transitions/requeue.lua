--! include _wake
--! include _declared
--! include _requeue_job
--! include _fence
-- Puts a whole in-progress list back on its queues: a dead process's (orphan recovery,
-- a dead child) or a stopping process's own.
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = process: its owner's process key
-- KEYS[3] = last_beat: the last_beat hash
-- KEYS[4] = repeat_orphans: the repeat_orphans list
-- KEYS[5] = dead: the dead set
-- KEYS[6] = fence: the owner's fence
-- KEYS[7] = wake: the wake stream
-- KEYS[8..] = declared(key): the keys the listed jobs' payloads name (_declared.lua):
-- their lists ("queue:<list>"), unique locks ("unique:<digest>"), orphan counters
-- ("orphanings:<jid>") and checkpoints ("checkpoint:<jid>"), each named by the ARGV beside it
-- ARGV[1] = default_queue: the queue of a job that names none
-- ARGV[2] = identity: the owner's identity
-- ARGV[3] = mode: whose requeue it is:
--   "own": the owner's, as it stops (refused, FENCED, if it was declared dead);
--   "reclaim": its master's, the owner being dead for sure (reaped): fenced if anything is listed;
--   "dead:<beat>": orphan recovery's, which watched the owner's beat stay at <beat> ("none":
--   no beat) for the orphan threshold. Done only if it still is, with no process key
-- ARGV[4] = now: the caller's clock (epoch s)
-- ARGV[5] = orphanings_ttl: the orphan counters' TTL
-- ARGV[6] = max_orphanings: max orphanings
-- ARGV[7] = count: "*" to count an orphaning per job, "j:<jid>" for that job only (the
-- one its owner ran: the others never started; several jids, one a line, for an owner
-- with several jobs in flight), "" for none (a resumable job that made progress since
-- its last orphaning is not counted: its checkpoint says so)
-- ARGV[8..] = declared(name): the names of KEYS[8..], in order
-- ARGV[8+n..] = marks: after the n names, "d:<job>" (finished, only the ack is missing:
-- dropping it is the ack) or "k:<job>" (leave it on the list)
-- Returns {moved, 1 if this fenced the owner (0 if it already was or it is "own"), {jobs
-- filed raw in dead...}, {"c", "u" or "p", job, ...}}, or {-1} if the owner turned out alive,
-- or {0, "need", name...} (nothing written) if a key a listed job names wasn't given.
-- The last list (empty in mode "own") names every job taken off a gone owner's list and
-- requeued or parked, "c" if an orphaning was counted for it, "p" if it was counted and
-- parked past the limit (it goes to dead): the caller fires `orphaned`.
-- Anyone else's requeue fences the owner first: if it wakes up, every script it runs is
-- refused, so it can't run or settle the copies it still holds while theirs run elsewhere.
local was_fenced = redis.call("EXISTS", KEYS[6]) == 1
if ARGV[3] == "own" then
  if was_fenced then return fenced(KEYS[6]) end
elseif ARGV[3] ~= "reclaim" then
  -- Checked here, atomically with the requeue: checked separately, an owner that beat
  -- in between would lose jobs it is still running to a second run.
  if redis.call("EXISTS", KEYS[2]) == 1 then
    return {-1}
  end
  local last = redis.pcall("HGET", KEYS[3], ARGV[2])
  if type(last) ~= "string" then last = "none" end -- none, or unreadable (wrong type)
  if ARGV[3] ~= "dead:" .. last then
    return {-1}
  end
end
local finished, keep = {}, {}
declare(8, #KEYS - 7)
for i = 8 + #KEYS - 7, #ARGV do
  local mark, payload = string.sub(ARGV[i], 1, 2), string.sub(ARGV[i], 3)
  if mark == "d:" then finished[payload] = true else keep[payload] = true end
end
local counted = {} -- "j:<jid>\n<jid>...": the jobs its owner was running
if string.sub(ARGV[7], 1, 2) == "j:" then
  for jid in string.gmatch(string.sub(ARGV[7], 3), "[^\n]+") do counted[jid] = true end
end
local function jid_of(job)  -- the listed job's jid, or nil (unreadable)
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["jid"]) == "string" then return decoded["jid"], decoded end
  return nil
end
local function counts(jid)  -- whether an orphaning of this job is counted
  return jid and ARGV[7] ~= "" and (ARGV[7] == "*" or counted[jid])
end
-- The keys the listed jobs name, asked for before the first write.
for _, job in ipairs(redis.call("LRANGE", KEYS[1], 0, -1)) do
  local jid = jid_of(job)
  if finished[job] then
    if jid then declared_key("orphanings", jid) end
  elseif not keep[job] then
    if counts(jid) then
      declared_key("orphanings", jid)
      declared_key("checkpoint", jid)
    end
    requeue_needs(job, ARGV[1])
  end
end
local need = needs_reply()
if need then return need end
local fenced_now = 0
-- A reaped child with nothing listed (a clean exit, recycling) needs no tombstone.
if ARGV[3] ~= "own" and not was_fenced and (ARGV[3] ~= "reclaim" or redis.call("LLEN", KEYS[1]) > 0) then
  redis.call("SET", KEYS[6], ARGV[4], "EX", 7 * 24 * 3600)
  fenced_now = 1
end
-- A resumable job (docs/architecture.md#iterable) whose checkpoint moved on since its last
-- orphaning (or, the first time, since the resume point its payload carries) was making
-- progress when it died: that death isn't counted toward max_orphanings. One that dies
-- again at the same checkpoint is. The checkpoint's items done only grow, so each death
-- left uncounted is paid for by progress. The items done at this orphaning are noted in
-- the checkpoint (only if there is one) for the next.
local function moved_on(decoded)
  local key = declared_key("checkpoint", decoded["jid"])
  local done = tonumber(redis.pcall("HGET", key, "done"))
  if not done or done ~= done or done >= math.huge then return false end -- none, or unreadable
  local before = tonumber(redis.pcall("HGET", key, "orphaned_done"))
  local from = tonumber(decoded["iter_done"])
  before = math.max(before or -1, from or 0)
  redis.pcall("HSET", key, "orphaned_done", done)
  return done > before
end
local moved, kept, buried, orphaned = 0, {}, {}, {}
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
    local jid = jid_of(job)
    if jid then redis.pcall("DEL", declared_key("orphanings", jid)) end
  elseif keep[job] then
    table.insert(kept, redis.call("LPOP", KEYS[1]))
  else
    local counter, parked = nil, false
    local jid, decoded = jid_of(job)
    if counts(jid) and not moved_on(decoded) then
      counter = declared_key("orphanings", jid)
      local current = redis.pcall("GET", counter)
      local count = type(current) == "string" and tonumber(current) or nil
      if count == nil and current then
        redis.pcall("DEL", counter) -- unusable: start over rather than switch the limit off
      end
      count = (count or 0) + 1
      if count > tonumber(ARGV[6]) then
        parked = type(redis.pcall("RPUSH", KEYS[4], job)) == "number"
        if not parked then
          -- Parking list unusable: straight to dead, raw; the caller completes it.
          parked = type(redis.pcall("ZADD", KEYS[5], ARGV[4], job)) == "number"
          if parked then table.insert(buried, job) end
        end
      end
    end
    local written = parked or pcall(requeue_job, job, ARGV[1], KEYS[7])
    redis.call("LPOP", KEYS[1])
    if written then
      if counter and not parked then
        redis.pcall("INCR", counter)
        redis.pcall("EXPIRE", counter, ARGV[5])
      end
      moved = moved + 1
      if ARGV[3] ~= "own" then
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
