-- Shared by the scripts that settle a job for good (complete.lua, file.lua and
-- file_head.lua on dead, cancel.lua) and by batch_close.lua: a batch's count and its
-- callbacks (docs/architecture.md#batches). Needs _workflow.lua (wf_push) before it.
-- Every key is built from the namespace prefix, as keys.py builds it; a batch's keys
-- share the hash tag {bid}. A job is counted once: its state in batch_jobs goes from
-- pending (or absent) to final once, whatever replays; each callback fires once
-- (HSETNX fired_at:<name>), never while the batch is open (on_death: at the first dead
-- job once closed), on_complete and on_success only once nothing is pending.

local function batch_fire(ns, b, name, now, errs)
  local payload = redis.call("HGET", b, "cb:" .. name)
  if not payload then return end
  if redis.call("HSETNX", b, "fired_at:" .. name, tostring(now)) == 0 then return end
  local lock = redis.call("HGET", b, "cbu:" .. name)
  if lock then
    -- A unique callback: its lock taken as unique_push.lua takes one, or it is not pushed.
    local jid = redis.call("HGET", b, "cbj:" .. name)
    if not redis.call("SET", lock, jid, "NX", "EX", redis.call("HGET", b, "cbut:" .. name)) then
      redis.call("HSET", b, "dropped:" .. name, "unique lock held")
      return
    end
  end
  wf_push(ns, redis.call("HGET", b, "cbq:" .. name), payload, errs)
  redis.pcall("INCR", ns .. "stats:batch_callbacks")
end

-- Fires what is due, nothing while open: on_death once a job is dead; once nothing is
-- pending, (once) done_at, the shorter TTLs, on_complete, and on_success if none failed.
local function batch_check(ns, bid, now, errs)
  local b = ns .. "batch:{" .. bid .. "}"
  if redis.call("HEXISTS", b, "open") == 1 then return end
  if (tonumber(redis.call("HGET", b, "dead")) or 0) > 0 then batch_fire(ns, b, "on_death", now, errs) end
  if (tonumber(redis.call("HGET", b, "pending")) or 0) > 0 then return end
  if redis.call("HSETNX", b, "done_at", tostring(now)) == 0 then return end
  local keep = math.max(1, math.floor(tonumber(redis.call("HGET", b, "keep")) or 86400))
  redis.call("HSET", b, "expires_at", tostring(tonumber(now) + keep))
  redis.call("EXPIRE", b, keep)
  redis.pcall("EXPIRE", ns .. "batch_jobs:{" .. bid .. "}", keep)
  batch_fire(ns, b, "on_complete", now, errs)
  local failed = (tonumber(redis.call("HGET", b, "dead")) or 0) + (tonumber(redis.call("HGET", b, "cancelled")) or 0)
  if failed == 0 then batch_fire(ns, b, "on_success", now, errs) end
end

-- Job jid of batch bid settled for good as state (succeeded, dead or cancelled).
local function batch_settle(ns, bid, jid, state, now, errs)
  local b = ns .. "batch:{" .. bid .. "}"
  if redis.call("EXISTS", b) == 0 then
    table.insert(errs, "batch " .. bid .. " expired before its job " .. jid .. " settled")
    return
  end
  local j = ns .. "batch_jobs:{" .. bid .. "}"
  local was = redis.call("HGET", j, jid)
  if was and was ~= "pending" then return end -- counted already: a replay
  if was then
    redis.call("HINCRBY", b, "pending", -1)
  else
    redis.call("HINCRBY", b, "total", 1) -- not seen joining (batch_push registers first): counted now
  end
  redis.call("HSET", j, jid, state)
  redis.call("HINCRBY", b, state, 1)
  batch_check(ns, bid, now, errs)
end

-- The batch an entry (a payload's JSON) belongs to, and its jid; nil if none.
local function batch_of(entry)
  if not string.find(entry, '"b":', 1, true) then return nil end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["wf"]) ~= "table" then return nil end
  if type(job["wf"]["b"]) ~= "string" or type(job["jid"]) ~= "string" then return nil end
  return job["wf"]["b"], job["jid"]
end
