--! include _retain
--! include _declared
-- Shared by the scripts that settle a job for good (complete.lua on success; file.lua,
-- file_head.lua and settle_dead.lua on dead, through _dead.lua; cancel.lua) and
-- cancel_workflow.lua: a kept result, the group/chord counter, a chain's end. The *_at
-- functions take their keys (complete.lua declares them in fixed KEYS); the others look them up among the declared
-- keys (_declared.lua): a dead job's by its payload, a callback's (its queue, its result)
-- by the group's record. Each has its *_needs twin, run before any write, that asks for
-- every such key the write will use. A group's keys share the hash tag {gid}, a result's
-- {jid}. Writes are pcall'ed: a key of the wrong type is reported, never stops the job's
-- own settlement (docs/architecture.md#workflows).
local WAIT_TTL = 300 -- a waiter's wake token: only a hint, the result is always re-read
-- The most kept results (status_max), set by the including script from its ARGV before it
-- calls wf_*: results are indexed in retained:results and the oldest trimmed (_retain.lua).
local wf_keep = 0
-- The fixed keys the including script sets from its KEYS before it calls wf_*: the kept
-- results' index (retained:results), the known-queues set and the wake stream.
local wf_results_index, wf_queues, wf_wake = nil, nil, nil
-- The results a script's wf_* will write (their keys), gathered by the *_needs, in order:
-- what their retention may shed is asked for too (wf_retain_needs).
local wf_result_adds = {}

local function wf_notify(key)
  redis.pcall("RPUSH", key, "1")
  redis.pcall("LTRIM", key, -1, -1)
  redis.pcall("EXPIRE", key, WAIT_TTL)
end

-- One kept result (a hash): status, value or the failure's fields, expires_at. The key
-- lives twice its TTL, so a reader past expires_at can say "expired" rather than "unknown".
-- key, wait_key: the result's and its waiters' wake token; index: the results' index.
local function wf_result_at(key, wait_key, index, fields, ttl, now, errs)
  ttl = math.max(1, math.floor(tonumber(ttl) or 3600))
  table.insert(fields, "expires_at")
  table.insert(fields, tostring(tonumber(now) + ttl))
  table.insert(fields, "ttl")
  table.insert(fields, tostring(ttl))
  local ok = redis.pcall("HSET", key, unpack(fields))
  if type(ok) == "table" and ok.err then
    table.insert(errs, key .. ": " .. ok.err)
    return
  end
  redis.pcall("EXPIRE", key, 2 * ttl)
  retain(index, key, now, wf_keep, 2 * ttl, declared_shed)
  wf_notify(wait_key)
end

local function wf_result_needs(jid)
  local key = declared_key("result", jid)
  declared_key("result_wait", jid)
  if key then table.insert(wf_result_adds, key) end
end

-- What the results gathered may shed from the results' index (keep: the most kept).
local function wf_retain_needs(keep)
  retain_needs(wf_results_index, wf_result_adds, keep, declared_shed)
end

-- Job jid's kept result, its keys declared (wf_result_needs asked for them).
local function wf_result(jid, fields, ttl, now, errs)
  local key, wait_key = declared_key("result", jid), declared_key("result_wait", jid)
  if not key or not wait_key then
    table.insert(errs, "the result of " .. jid .. " was not declared: not kept")
    return
  end
  wf_result_at(key, wait_key, wf_results_index, fields, ttl, now, errs)
end

-- A job pushed by a script (a chain's next step, a chord's callback): as an enqueue does.
-- key: the queue's, queues: the known-queues set, wake_key: the wake stream.
local function wf_push_at(key, queues, wake_key, queue, payload, errs)
  local n = redis.pcall("LPUSH", key, payload)
  if type(n) == "table" and n.err then
    table.insert(errs, key .. ": " .. n.err)
    return
  end
  redis.pcall("SADD", queues, queue)
  if n == 1 then wake(wake_key) end
end

-- A push onto the queue named queue, its key declared (asked for by a *_needs).
local function wf_push(queue, payload, errs)
  local key = declared_key("queue", queue)
  if not key then
    table.insert(errs, "queue " .. tostring(queue) .. " was not declared: a callback not pushed")
    return
  end
  wf_push_at(key, wf_queues, wf_wake, queue, payload, errs)
end

-- Whether index is one of group g's members (0 .. n-1): a forged index is not, and must
-- neither count towards the group's end nor fail it.
-- n: the group's n as read (nil or false when there is none).
local function wf_in_group(index, n)
  local at = tonumber(index)
  if not at or at < 0 or at % 1 ~= 0 then return false end
  return type(n) == "string" and at < (tonumber(n) or 0)
end

local function wf_is_member(g, index)
  return wf_in_group(index, redis.pcall("HGET", g, "n")) -- (a key of the wrong type: no member)
end

-- The failure fields of a dead job, as a kept result's.
local function wf_failure(job, now)
  local function text(v) if type(v) == "string" then return v end return "" end
  return {"status", "dead", "jid", text(job["jid"]), "class", text(job["class"]),
          "error_class", text(job["error_class"]), "error_message", text(job["error_message"]),
          "traceback", text(job["error_traceback"]), "finished_at", tostring(now)}
end

-- The job an entry holds, if it is a workflow's (its wf a table), else nil.
local function wf_job(entry)
  if not string.find(entry, '"wf":', 1, true) then return nil end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["wf"]) ~= "table" then return nil end
  return job
end

-- Whether group g (its key declared) fails now that its member index went dead: a
-- member, not done, not failed yet (wf_dead's HSETNX failed then succeeds).
local function wf_fails(g, index)
  return wf_is_member(g, index) and peek("HEXISTS", g, "done_at") == 0 and peek("HEXISTS", g, "failed") == 0
end

-- The keys wf_dead will write for the job entry holds (asked for, not written).
local function wf_dead_needs(entry)
  local job = wf_job(entry)
  if not job then return end
  local wf = job["wf"]
  if type(job["jid"]) == "string" and wf["ttl"] then wf_result_needs(job["jid"]) end
  if type(wf["last"]) == "string" and wf["last"] ~= job["jid"] then wf_result_needs(wf["last"]) end
  if type(wf["g"]) == "string" then
    local g = declared_key("group", wf["g"])
    declared_key("group_wait", wf["g"])
    if g and wf_fails(g, wf["i"]) then
      local cbj = redis.pcall("HGET", g, "cbj")
      if type(cbj) == "string" and cbj ~= "" then wf_result_needs(cbj) end
    end
  end
end

-- A job of a workflow went dead: its own result (if kept), its chain's end and its group
-- say so; a chord's callback never fires (its result says which member died).
local function wf_dead(entry, now, errs)
  local job = wf_job(entry)
  if not job then return end
  local wf = job["wf"]
  if type(job["jid"]) == "string" and wf["ttl"] then
    wf_result(job["jid"], wf_failure(job, now), wf["ttl"], now, errs)
  end
  if type(wf["last"]) == "string" and wf["last"] ~= job["jid"] then
    wf_result(wf["last"], wf_failure(job, now), wf["lttl"] or wf["ttl"] or 3600, now, errs)
  end
  if type(wf["g"]) == "string" then
    local g, g_wait = declared_key("group", wf["g"]), declared_key("group_wait", wf["g"])
    if not g or not g_wait then
      table.insert(errs, "group " .. wf["g"] .. " was not declared: not told")
      return
    end
    if wf_is_member(g, wf["i"]) and redis.call("HEXISTS", g, "done_at") == 0
       and redis.pcall("HSETNX", g, "failed", tostring(wf["i"])) == 1 then
      local f = wf_failure(job, now)
      for i = 1, #f, 2 do redis.pcall("HSET", g, "f:" .. f[i], f[i + 1]) end
      wf_notify(g_wait)
      local cbj = redis.pcall("HGET", g, "cbj")
      if type(cbj) == "string" and cbj ~= "" then
        wf_result(cbj, wf_failure(job, now), redis.pcall("HGET", g, "ttl"), now, errs)
      end
    end
  end
end

-- A job of a workflow was cancelled (cancel.lua): it settles as a dead one would, its
-- error cogworker.Cancelled, so its group fails (a chord's callback never fires) and its
-- chain's result says where it stopped.
local function wf_cancelled(entry, now, errs)
  local job = wf_job(entry)
  if not job then return end
  job["error_class"] = "cogworker.Cancelled"
  job["error_message"] = "cancelled (cogworker.api.cancel)"
  job["error_traceback"] = nil
  wf_dead(cjson.encode(job), now, errs)
end

-- A member of group gid succeeded: its result kept once (HSETNX: a replay changes
-- nothing); the last one fires the chord's callback, exactly once (left reaches 0 once),
-- and records that it did (fired, fired_by).
-- g, g_wait: the group's keys; the chord's callback's queue is read from its record.
local function wf_member_at(g, g_wait, gid, index, value, now, errs, jid)
  if redis.call("EXISTS", g) == 0 then
    table.insert(errs, "group " .. gid .. " expired before its member " .. index .. " settled")
    return
  end
  if not wf_is_member(g, index) then
    -- A forged index: counting it would fire the callback early.
    table.insert(errs, "group " .. gid .. " has no member " .. tostring(index) .. ": not counted")
    return
  end
  if redis.call("HSETNX", g, "r:" .. index, value) == 0 then return end
  if redis.call("HINCRBY", g, "left", -1) ~= 0 then return end
  local ttl = tonumber(redis.call("HGET", g, "ttl")) or 3600
  redis.call("HSET", g, "done_at", tostring(now), "expires_at", tostring(tonumber(now) + ttl))
  redis.call("EXPIRE", g, 2 * ttl)
  wf_notify(g_wait)
  local head = redis.call("HGET", g, "cb")
  if not head or redis.call("HEXISTS", g, "failed") == 1 then return end
  local payload = head
  if redis.call("HGET", g, "cbmode") == "list" then
    local n = tonumber(redis.call("HGET", g, "n"))
    local parts = {}
    for i = 0, n - 1 do table.insert(parts, redis.call("HGET", g, "r:" .. i) or "null") end
    payload = head .. "[" .. table.concat(parts, ",") .. "]" .. redis.call("HGET", g, "cbt")
  end
  wf_push(redis.call("HGET", g, "cbq"), payload, errs)
  redis.call("HSET", g, "fired", tostring(now), "fired_by", jid)
end

-- The key wf_member_at will write beyond g's: the chord's callback's queue, if this
-- member is the last (left reaches 0 now) and the callback fires (none failed). The
-- record's n and left in one read (a group gone, or of the wrong type, has neither: no
-- member), the rest only for the member that may be the last.
local function wf_member_needs(g, index)
  local state = peek("HMGET", g, "n", "left") or {}
  if not wf_in_group(index, state[1]) then return end
  if tonumber(state[2]) ~= 1 or peek("HEXISTS", g, "r:" .. index) ~= 0 then return end
  if peek("HEXISTS", g, "cb") ~= 1 or peek("HEXISTS", g, "failed") ~= 0 then return end
  declared_key("queue", peek("HGET", g, "cbq"))
end
