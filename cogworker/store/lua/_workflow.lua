-- Shared by the scripts that settle a job for good (complete.lua on success; file.lua and
-- file_head.lua on dead): a kept result, the group/chord counter, a chain's end. Every
-- key is built from the namespace prefix ARGV names (keys.py builds the same names); a
-- group's keys share the hash tag {gid}, a result's {jid}. Writes are pcall'ed: a key of
-- the wrong type is reported, never stops the job's own settlement (docs/architecture.md#workflows).
local WAIT_TTL = 300 -- a waiter's wake token: only a hint, the result is always re-read

local function wf_notify(key)
  redis.pcall("RPUSH", key, "1")
  redis.pcall("LTRIM", key, -1, -1)
  redis.pcall("EXPIRE", key, WAIT_TTL)
end

-- One kept result (a hash): status, value or the failure's fields, expires_at. The key
-- lives twice its TTL, so a reader past expires_at can say "expired" rather than "unknown".
local function wf_result(ns, jid, fields, ttl, now, errs)
  local key = ns .. "result:{" .. jid .. "}"
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
  wf_notify(ns .. "result_wait:{" .. jid .. "}")
end

-- A job pushed by a script (a chain's next step, a chord's callback): as an enqueue does.
local function wf_push(ns, queue, payload, errs)
  local n = redis.pcall("LPUSH", ns .. "queue:" .. queue, payload)
  if type(n) == "table" and n.err then
    table.insert(errs, ns .. "queue:" .. queue .. ": " .. n.err)
    return
  end
  redis.pcall("SADD", ns .. "queues", queue)
  if n == 1 then wake(ns .. "wake") end
end

-- The failure fields of a dead job, as a kept result's.
local function wf_failure(job, now)
  local function text(v) if type(v) == "string" then return v end return "" end
  return {"status", "dead", "jid", text(job["jid"]), "class", text(job["class"]),
          "error_class", text(job["error_class"]), "error_message", text(job["error_message"]),
          "traceback", text(job["error_traceback"]), "finished_at", tostring(now)}
end

-- A job of a workflow went dead: its own result (if kept), its chain's end and its group
-- say so; a chord's callback never fires (its result says which member died).
local function wf_dead(ns, entry, now, errs)
  if not string.find(entry, '"wf":', 1, true) then return end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["wf"]) ~= "table" then return end
  local wf = job["wf"]
  if type(job["jid"]) == "string" and wf["ttl"] then
    wf_result(ns, job["jid"], wf_failure(job, now), wf["ttl"], now, errs)
  end
  if type(wf["last"]) == "string" and wf["last"] ~= job["jid"] then
    wf_result(ns, wf["last"], wf_failure(job, now), wf["lttl"] or wf["ttl"] or 3600, now, errs)
  end
  if type(wf["g"]) == "string" then
    local g = ns .. "group:{" .. wf["g"] .. "}"
    if redis.call("EXISTS", g) == 1 and redis.pcall("HSETNX", g, "failed", tostring(wf["i"])) == 1 then
      local f = wf_failure(job, now)
      for i = 1, #f, 2 do redis.pcall("HSET", g, "f:" .. f[i], f[i + 1]) end
      wf_notify(ns .. "group_wait:{" .. wf["g"] .. "}")
      local cbj = redis.pcall("HGET", g, "cbj")
      if type(cbj) == "string" and cbj ~= "" then
        wf_result(ns, cbj, wf_failure(job, now), redis.pcall("HGET", g, "ttl"), now, errs)
      end
    end
  end
end

-- A job of a workflow was cancelled (cancel.lua): it settles as a dead one would, its
-- error cogworker.Cancelled, so its group fails (a chord's callback never fires) and its
-- chain's result says where it stopped.
local function wf_cancelled(ns, entry, now, errs)
  if not string.find(entry, '"wf":', 1, true) then return end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["wf"]) ~= "table" then return end
  job["error_class"] = "cogworker.Cancelled"
  job["error_message"] = "cancelled (cogworker.api.cancel)"
  job["error_traceback"] = nil
  wf_dead(ns, cjson.encode(job), now, errs)
end

-- A member of group gid succeeded: its result kept once (HSETNX: a replay changes
-- nothing); the last one fires the chord's callback, exactly once (left reaches 0 once),
-- and records that it did (fired, fired_by).
local function wf_member(ns, gid, index, value, now, errs, jid)
  local g = ns .. "group:{" .. gid .. "}"
  if redis.call("EXISTS", g) == 0 then
    table.insert(errs, "group " .. gid .. " expired before its member " .. index .. " settled")
    return
  end
  if redis.call("HSETNX", g, "r:" .. index, value) == 0 then return end
  if redis.call("HINCRBY", g, "left", -1) ~= 0 then return end
  local ttl = tonumber(redis.call("HGET", g, "ttl")) or 3600
  redis.call("HSET", g, "done_at", tostring(now), "expires_at", tostring(tonumber(now) + ttl))
  redis.call("EXPIRE", g, 2 * ttl)
  wf_notify(ns .. "group_wait:{" .. gid .. "}")
  local head = redis.call("HGET", g, "cb")
  if not head or redis.call("HEXISTS", g, "failed") == 1 then return end
  local payload = head
  if redis.call("HGET", g, "cbmode") == "list" then
    local n = tonumber(redis.call("HGET", g, "n"))
    local parts = {}
    for i = 0, n - 1 do table.insert(parts, redis.call("HGET", g, "r:" .. i) or "null") end
    payload = head .. "[" .. table.concat(parts, ",") .. "]" .. redis.call("HGET", g, "cbt")
  end
  wf_push(ns, redis.call("HGET", g, "cbq"), payload, errs)
  redis.call("HSET", g, "fired", tostring(now), "fired_by", jid)
end
