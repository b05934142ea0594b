--! include _fence
--! include _declared
-- A job with rate limits asks for them just before it starts (docs/architecture.md#limits):
-- admitted by every one of its limiters at once, or parked in `schedule` until the
-- strictest one can admit it (with jitter), off the list in the same step: not run, not a
-- failure, not a retry. Jobs without limits never run this.
-- KEYS[1] = fence: the process's fence
-- KEYS[2] = last_beat: the last_beat hash
-- KEYS[3] = in_progress: its in-progress list
-- KEYS[4] = schedule: the schedule
-- KEYS[5] = limits: the limiters seen
-- KEYS[6] = limits_over: the deferral count
-- KEYS[7..] = limiters(record, slots, starts, waiting): 4 keys per limit: its record,
-- held slots, window starts, waiting jobs
-- KEYS[7+4c..] = declared(key): after the c limits' keys, the fences ("fenced:<identity>") of
-- the holders of a full limiter's slots (_declared.lua), each named by the ARGV beside it
-- ARGV[1] = identity: the process's identity
-- ARGV[2] = job: the job as listed
-- ARGV[3] = jid: its id
-- ARGV[4] = now: "" (Redis's TIME), a test's clock otherwise
-- ARGV[5] = jitter: a random number in [0, 1) for the jitter
-- ARGV[6] = count (derived): how many limits
-- ARGV[7..] = limiters(kind, name, n, per): 4 per limit: kind ("concurrency" or
-- "window"), name, n, per (seconds)
-- ARGV[7+4c..] = declared(name): the names of the declared keys, in order
-- Returns {1} admitted; {0, due, name} parked until due for limiter name; {-1} the job was
-- not on the list (nothing written); {0, "need", name...} (nothing written) if a holder's
-- fence wasn't given.
local refused = fenced(KEYS[1])
if refused then return refused end
local count = tonumber(ARGV[6])
declare(7 + count * 4)
declared_by_name["fenced:" .. ARGV[1]] = KEYS[1]  -- this process's own fence, given anyway
-- The holders of a full concurrency limiter's slots are checked (purge_held below): their
-- fences asked for before any write.
for i = 0, count - 1 do
  local held, kind, n = KEYS[8 + i * 4], ARGV[7 + i * 4], tonumber(ARGV[9 + i * 4])
  if kind == "concurrency" and redis.call("ZCARD", held) >= n then
    for _, m in ipairs(redis.call("ZRANGE", held, 0, -1)) do declared_key("fenced", string.match(m, "^(.*)\t") or m) end
  end
end
local need = needs_reply()
if need then return need end
beat(KEYS[2], ARGV[1])
local now
if ARGV[4] ~= "" then
  now = tonumber(ARGV[4])
else
  local t = redis.call("TIME")
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local raw, identity = ARGV[2], ARGV[1]
local member = identity .. "\t" .. ARGV[3]
local KEEP = 7 * 24 * 3600     -- a limiter unused this long is forgotten (keys' TTL)
local WAIT_STALE = 60          -- a waiting entry this far past its due time was moved by the poller
local WAIT_CAP = 10000         -- waiting entries kept per limiter (the rest still wait, in schedule)
local LIMITERS_CAP = 1000      -- limiters listed (the least recently used are dropped)

-- A held slot whose holder was declared dead (fenced) or has deregistered is free: the
-- lease of a process ends with it (its job was requeued by whoever fenced it).
local function purge_held(held)
  for _, m in ipairs(redis.call("ZRANGE", held, 0, -1)) do
    local who = string.match(m, "^(.*)\t") or m
    if redis.call("EXISTS", declared_key("fenced", who)) == 1 or redis.call("HEXISTS", KEYS[2], who) == 0 then
      redis.call("ZREM", held, m)
    end
  end
  redis.call("ZREMRANGEBYSCORE", held, "-inf", now - KEEP)
end

local due_max, due_name = nil, nil
local blocked = {}
for i = 0, count - 1 do
  local k, a = 6 + i * 4, 6 + i * 4
  local rec, held, starts, waiting = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local kind, name, n, per = ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  redis.call("ZREMRANGEBYSCORE", waiting, "-inf", now - WAIT_STALE)
  redis.call("ZREM", waiting, raw)
  local due = nil
  if kind == "concurrency" then
    if redis.call("ZCARD", held) >= n then
      purge_held(held)
      if redis.call("ZCARD", held) >= n then
        -- The k-th waiter gets a slot after about (1 + k / n) average holds; a release
        -- promotes the first waiter sooner (limit_release.lua).
        -- Before any release, the oldest hold's age (at least 1 s) stands for the average.
        local avg = tonumber(redis.call("HGET", rec, "avg"))
        if not avg then
          local oldest = redis.call("ZRANGE", held, 0, 0, "WITHSCORES")
          avg = math.min(math.max(1.0, now - (tonumber(oldest[2]) or now)), 300)
        end
        local ahead = redis.call("ZCOUNT", waiting, now, "+inf")
        due = now + math.max(avg, 0.01) * (1 + math.floor(ahead / n))
      end
    end
  else
    redis.call("ZREMRANGEBYSCORE", starts, "-inf", now - per)
    local used = redis.call("ZCARD", starts)
    if used >= n then
      -- The k-th waiter starts when the (k mod n)-th oldest start leaves the window, k / n
      -- windows later.
      local ahead = redis.call("ZCOUNT", waiting, now, "+inf")
      local oldest = redis.call("ZRANGE", starts, ahead % n, ahead % n, "WITHSCORES")
      local at = tonumber(oldest[2]) or now
      due = at + per * (1 + math.floor(ahead / n))
    end
  end
  if due then
    blocked[#blocked + 1] = {rec, waiting, name, kind, n, per}
    if not due_max or due > due_max then due_max, due_name = due, name end
  end
end

local function note(rec, name, kind, n, per)
  redis.call("HSET", rec, "kind", kind, "n", n, "per", per, "seen", tostring(now))
  redis.call("EXPIRE", rec, KEEP)
  redis.call("ZADD", KEYS[5], now, name)
end

if not due_max then
  for i = 0, count - 1 do
    local k, a = 6 + i * 4, 6 + i * 4
    local kind, name, n, per = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4])
    if kind == "concurrency" then
      redis.call("ZADD", KEYS[k + 2], now, member)
      redis.call("EXPIRE", KEYS[k + 2], KEEP)
    else
      redis.call("ZADD", KEYS[k + 3], now, ARGV[3] .. ":" .. tostring(now))
      redis.call("EXPIRE", KEYS[k + 3], math.ceil(per) + 1)
    end
    note(KEYS[k + 1], name, kind, n, per)
  end
  redis.call("ZREMRANGEBYSCORE", KEYS[5], "-inf", now - KEEP)
  redis.call("ZREMRANGEBYRANK", KEYS[5], 0, -(LIMITERS_CAP + 1))
  return {1}
end

-- Over a limit: parked. Written first, removed second; not on the list: undone.
local spread = math.min(math.max(0.2 * (due_max - now), 0.01), 2.0)
local due = due_max + spread * tonumber(ARGV[5])
redis.call("ZADD", KEYS[4], due, raw)
if redis.call("LREM", KEYS[3], 1, raw) == 0 then
  redis.call("ZREM", KEYS[4], raw)
  return {-1}
end
redis.call("INCR", KEYS[6])
for _, b in ipairs(blocked) do
  local rec, waiting = b[1], b[2]
  redis.call("HINCRBY", rec, "over", 1)
  redis.call("ZADD", waiting, due, raw)
  if redis.call("ZCARD", waiting) > WAIT_CAP then
    redis.call("ZREMRANGEBYRANK", waiting, WAIT_CAP, -1)
  end
  redis.call("EXPIRE", waiting, KEEP)
  note(rec, b[3], b[4], b[5], b[6])
end
return {0, tostring(due), due_name}
