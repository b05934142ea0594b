-- Shared by the scripts that settle a job for good (complete.lua, file.lua and
-- file_head.lua on dead, cancel.lua) and by batch_close.lua: a batch's count and its
-- callbacks (docs/architecture.md#batches). Needs _workflow.lua (wf_push) before it.
-- The *_at functions take the batch's keys (complete.lua declares them: keys.py names
-- them); the others look them up among the declared keys (_declared.lua), as a
-- callback's queue and unique lock are, by what the record says. Each has its *_needs
-- twin, run before any write, that asks for those keys. A batch's keys share the hash
-- tag {bid}. A job is counted once: its state in batch_jobs goes from
-- pending (or absent) to final once, whatever replays; each callback fires once
-- (HSETNX fired_at:<name>), never while the batch is open (on_death: at the first dead
-- job once closed), on_complete and on_success only once nothing is pending.

-- The batch callbacks pushed, ever (stats:batch_callbacks): set by the including script.
local batch_callbacks_key = nil

local function batch_fire(b, name, now, errs)
  local payload = redis.call("HGET", b, "cb:" .. name)
  if not payload then return end
  if redis.call("HEXISTS", b, "fired_at:" .. name) == 1 then return end
  local queue, lock = redis.call("HGET", b, "cbq:" .. name), redis.call("HGET", b, "cbu:" .. name)
  local lock_key = lock and declared_key("key", lock)
  if not declared_key("queue", queue) or (lock and not lock_key) then
    table.insert(errs, "batch callback " .. name .. ": its keys were not declared: not fired")
    return
  end
  redis.call("HSETNX", b, "fired_at:" .. name, tostring(now))
  if lock then
    -- A unique callback: its lock taken as unique_push.lua takes one, or it is not pushed.
    local jid = redis.call("HGET", b, "cbj:" .. name)
    if not redis.call("SET", lock_key, jid, "NX", "EX", redis.call("HGET", b, "cbut:" .. name)) then
      redis.call("HSET", b, "dropped:" .. name, "unique lock held")
      return
    end
  end
  wf_push(queue, payload, errs)
  redis.pcall("INCR", batch_callbacks_key)
end

-- The keys batch_fire(b, name) writes, if it may fire: its queue and unique lock.
local function batch_fire_needs(b, name)
  if peek("HEXISTS", b, "cb:" .. name) ~= 1 or peek("HEXISTS", b, "fired_at:" .. name) ~= 0 then return end
  declared_key("queue", peek("HGET", b, "cbq:" .. name))
  local lock = peek("HGET", b, "cbu:" .. name)
  if lock then declared_key("key", lock) end
end

-- Fires what is due, nothing while open: on_death once a job is dead; once nothing is
-- pending, (once) done_at, the shorter TTLs, on_complete, and on_success if none failed.
-- b, j: the batch's record and jobs. The record's open, dead and pending in one read
-- (HMGET: a settlement pays one call here, not three).
local function batch_check_at(b, j, now, errs)
  local state = redis.call("HMGET", b, "open", "dead", "pending")
  if state[1] then return end
  if (tonumber(state[2]) or 0) > 0 then batch_fire(b, "on_death", now, errs) end
  if (tonumber(state[3]) or 0) > 0 then return end
  if redis.call("HSETNX", b, "done_at", tostring(now)) == 0 then return end
  local keep = math.max(1, math.floor(tonumber(redis.call("HGET", b, "keep")) or 86400))
  redis.call("HSET", b, "expires_at", tostring(tonumber(now) + keep))
  redis.call("EXPIRE", b, keep)
  redis.pcall("EXPIRE", j, keep)
  batch_fire(b, "on_complete", now, errs)
  local failed = (tonumber(redis.call("HGET", b, "dead")) or 0) + (tonumber(redis.call("HGET", b, "cancelled")) or 0)
  if failed == 0 then batch_fire(b, "on_success", now, errs) end
end

-- The keys batch_check_at will write once this settlement (a job's state settled, or
-- nil: batch_close's close, closing) is counted: those of each callback that may fire.
-- The record's fields it reads, in one HMGET (peek: nothing where b has the wrong type).
local function batch_check_needs(b, settled, closing)
  local state = peek("HMGET", b, "open", "dead", "pending", "done_at", "cancelled") or {}
  if not closing and state[1] then return end
  local function count(at, name)
    return (tonumber(state[at]) or 0) + ((settled == name) and 1 or 0)
  end
  local dead = count(2, "dead")
  if dead > 0 then batch_fire_needs(b, "on_death") end
  local pending = (tonumber(state[3]) or 0) - (settled and 1 or 0)
  if pending > 0 or state[4] then return end
  batch_fire_needs(b, "on_complete")
  if dead + count(5, "cancelled") == 0 then batch_fire_needs(b, "on_success") end
end

-- Job jid of batch bid (its record b, its jobs j) settled for good as state (succeeded,
-- dead or cancelled).
local function batch_settle_at(b, j, bid, jid, state, now, errs)
  if redis.call("EXISTS", b) == 0 then
    table.insert(errs, "batch " .. bid .. " expired before its job " .. jid .. " settled")
    return
  end
  local was = redis.call("HGET", j, jid)
  if not was then
    -- Every member joined through batch_push.lua, which registers it first: a job that
    -- names a batch it never joined is forged (or mistaken). Counting it would fire a
    -- finished batch's on_death after its on_success.
    table.insert(errs, "job " .. jid .. " names batch " .. bid .. " but never joined it: not counted")
    return
  end
  if was ~= "pending" then return end -- counted already: a replay
  redis.call("HINCRBY", b, "pending", -1)
  redis.call("HSET", j, jid, state)
  redis.call("HINCRBY", b, state, 1)
  batch_check_at(b, j, now, errs)
end

-- The keys batch_settle_at(b, j, ...) will write beyond b's and j's.
-- (A record gone asks for nothing: batch_check_needs reads none of its fields.)
local function batch_settle_needs_at(b, j, jid, state)
  if peek("HGET", j, jid) ~= "pending" then return end
  batch_check_needs(b, state, false)
end

-- As batch_settle_at, the batch's keys looked up among the declared (its bid's).
local function batch_settle(bid, jid, state, now, errs)
  local b, j = declared_key("batch", bid), declared_key("batch_jobs", bid)
  if not b or not j then
    table.insert(errs, "batch " .. bid .. " was not declared: its job " .. jid .. " not counted")
    return
  end
  batch_settle_at(b, j, bid, jid, state, now, errs)
end

local function batch_settle_needs(bid, jid, state)
  local b, j = declared_key("batch", bid), declared_key("batch_jobs", bid)
  if b and j then batch_settle_needs_at(b, j, jid, state) end
end

-- The batch an entry (a payload's JSON) belongs to, and its jid; nil if none.
local function batch_of(entry)
  if not string.find(entry, '"b":', 1, true) then return nil end
  local ok, job = pcall(cjson.decode, entry)
  if not ok or type(job) ~= "table" or type(job["wf"]) ~= "table" then return nil end
  if type(job["wf"]["b"]) ~= "string" or type(job["jid"]) ~= "string" then return nil end
  return job["wf"]["b"], job["jid"]
end
