-- Shared by the fetch scripts (docs/architecture.md#fetch): which queue gives the next job.
-- The queues are KEYS[first..], in the order to try.

-- The paused queues among KEYS[first..] (key -> true), read in the same step as the move,
-- so no job of a queue is taken once its pause landed: the set holds names, and a queue
-- key is the queue prefix then its name (matched, never built). Best-effort: a paused set
-- of the wrong type pauses nothing.
-- Also returns the names when since (below) is not "": a worker keeping known-empty queues
-- never counts a paused one empty (a resume by hand, SREM, must count at the next fetch).
local function paused_keys(set, prefix, since, first)
  local paused, names = {}, {}
  local got = redis.pcall("SMEMBERS", set)
  if type(got) == "table" and not got["err"] then
    if since ~= "" then names = got end
    if #got > 0 then
      local by_name, n = {}, #prefix
      for _, name in ipairs(got) do by_name[name] = true end
      for i = first, #KEYS do
        local key = KEYS[i]
        if string.sub(key, 1, n) == prefix then
          -- a priority level's list ("<queue> <p>", keys.level_name) is paused with its queue
          local name = string.sub(key, n + 1)
          if by_name[name] or by_name[string.match(name, "^(.-) %-?%d+$") or ""] then paused[key] = true end
        end
      end
    end
  end
  return paused, names
end

-- Known-empty queues (docs/architecture.md#idle-queues): a worker of several queues
-- leaves out of its fetch the queues it found empty, and sends the wake stream's newest
-- ID as it was then ("since"). Every cogworker write that fills an empty queue XADDs that
-- stream, so the same newest ID now means they are still empty; a newer one makes the
-- fetch stale: it takes nothing, and the worker fetches again naming every queue.
-- since = "" (none kept: nothing to check or report), "*" (every queue named: report the
-- newest ID if this fetch finds some empty), or the ID the left-out queues were empty at.

-- The stream's newest ID ("0-0" when it has none, "" when it can't be read).
local function newest_wake(wake)
  local got = redis.pcall("XREVRANGE", wake, "+", "-", "COUNT", 1)
  if type(got) ~= "table" or got["err"] then return "" end
  return got[1] and got[1][1] or "0-0"
end

-- Before the take: the newest ID, and true when the queues left out may have a job now.
local function wake_moved(since, wake)
  if since == "" or since == "*" then return "", false end
  local newest = newest_wake(wake)
  return newest, newest ~= since
end

-- A stale fetch's reply (fetch.lua's shape): nothing taken, so its look-ahead record goes.
local function stale_reply(ahead, identity, newest)
  if ahead and ahead ~= "" then redis.call("HDEL", ahead, identity) end
  return {-1, "", "", newest, {}}
end

-- After the take (gained: some queue was found empty): the newest ID the worker learns at.
local function learned_at(since, newest, wake, gained)
  if since == "*" and gained then return newest_wake(wake) end
  return newest
end

-- One LMOVE per queue of keys[from..to]: the slow path, which names every unreadable key.
local function take_each(list, keys, from, to, bad)
  for j = from, to do
    local job = redis.pcall("LMOVE", keys[j], list, "RIGHT", "LEFT")
    if type(job) == "string" then return j, job end
    if type(job) == "table" and job["err"] then
      table.insert(bad, keys[j])
      table.insert(bad, job["err"])
    end
  end
  return nil
end

-- One LMPOP per 500 queues of keys[from..]: Redis scans them in C, so an idle queue costs
-- a key lookup, not a command. The job goes onto the list's head in the same step (if
-- the list can't take it, back to the fetch end of its queue, as if never moved).
-- Returns the queue's position in keys and the job; nil when all are empty; false when
-- LMPOP failed (a key of the wrong type among them, or Redis < 7 without LMPOP).
local function take_scan(list, keys, from, bad)
  for c = from, #keys, 500 do
    local last = math.min(c + 499, #keys)
    local args = {unpack(keys, c, last)}
    table.insert(args, "RIGHT")
    local got = redis.pcall("LMPOP", last - c + 1, unpack(args))
    if type(got) == "table" and got["err"] then return false end
    if got then
      local key, job = got[1], got[2][1]
      local pushed = redis.pcall("LPUSH", list, job)
      if type(pushed) == "table" and pushed["err"] then
        redis.call("RPUSH", key, job)
        table.insert(bad, key)
        table.insert(bad, pushed["err"])
        return nil
      end
      for j = c, last do
        if keys[j] == key then return j, job end
      end
    end
  end
  return nil
end

-- Moves the oldest job (the right end) of the first non-empty queue of KEYS[first..]
-- that is not paused onto the head of list. Returns that queue's index in KEYS and the
-- job, or nil when none had one; each queue key that could not be moved from is
-- appended to bad, with Redis's error. The first queue is tried with LMOVE (the usual
-- case: one command), the rest with take_scan, unless the LMOVE met an error other than
-- a key of the wrong type: under OOM a script's first write is refused if it may enlarge
-- memory (LMOVE) but LMPOP's is not, and would take a job the LMOVEs leave in place.
-- One job per call: a fetch of several jobs calls it again (bad keeps what it gathered).
local function take_first(list, first, paused, bad)
  local keys, at = KEYS, nil
  if next(paused) ~= nil then
    keys, at = {}, {}
    for i = first, #KEYS do
      if not paused[KEYS[i]] then
        table.insert(keys, KEYS[i])
        table.insert(at, i)
      end
    end
    first = 1
  end
  if first > #keys then return nil end
  local errors = #bad
  local j, job = take_each(list, keys, first, first, bad)
  local rest = first + 1
  if not j and rest <= #keys then
    local refused = #bad > errors and string.sub(bad[#bad], 1, 10) ~= "WRONGTYPE "
    if not refused and rest < #keys then j, job = take_scan(list, keys, rest, bad) end
    if j == false or refused or rest == #keys then
      j, job = take_each(list, keys, rest, #keys, bad)
    end
  end
  if not j then return nil end
  return at and at[j] or j, job
end

-- A fetch that found every queue empty: its look-ahead record goes, and the newest ID of
-- the wake stream (from which the worker blocks) is returned, "" when it does not block.
-- newest: the ID already read by this script ("" when not).
local function went_dry(ahead, identity, wake, newest)
  if ahead and ahead ~= "" then redis.call("HDEL", ahead, identity) end
  if wake == "" then return "" end
  if newest and newest ~= "" then return newest end
  local got = redis.pcall("XREVRANGE", wake, "+", "-", "COUNT", 1)
  if type(got) == "table" and got[1] then return got[1][1] end
  return "0-0"
end

-- Strict order, for a move the client made before the script (fetch_moved.lua,
-- fetch_ahead_moved.lua): true when a queue tried before the guess, KEYS[first..guess-1],
-- has a job (or the guess itself is paused), so the move must be undone. One EXISTS per
-- 500 of them: an idle queue costs a key lookup, not a command.
local function out_of_order(first, guess, paused)
  if paused[KEYS[guess]] then return true end
  local before = {}
  for i = first, guess - 1 do
    if not paused[KEYS[i]] then table.insert(before, KEYS[i]) end
  end
  for i = 1, #before, 500 do
    if redis.call("EXISTS", unpack(before, i, math.min(i + 499, #before))) > 0 then return true end
  end
  return false
end
