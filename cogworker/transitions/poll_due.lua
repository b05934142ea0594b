--! include _wake
--! include _level
--! include _declared
-- Moves due entries of a sorted set (schedule or retry) onto their queues.
-- KEYS[1] = zset: the sorted set
-- KEYS[2] = queues: the known-queues set
-- KEYS[3] = wake: the wake stream
-- KEYS[4..] = declared(key): the lists of due entries' queues (or levels), each named by
-- the ARGV beside it ("queue:<list>", _declared.lua)
-- ARGV[1] = now: epoch s
-- ARGV[2] = most: how many at most
-- ARGV[3] = default_queue: the queue of an entry that names none
-- ARGV[4] = skip: how many due entries to skip (ones the caller already found stuck)
-- ARGV[5..] = declared(name): the names of KEYS[4..], in order
-- Returns {moved, {entries that are not a job object...}, stuck, the error that left the
-- first one stuck or ""}, or {0, "need", name...} (nothing written) if a due entry's list
-- wasn't given. The payload is pushed exactly as stored (re-encoding it in Lua
-- would round big numbers). An entry that is not a job object is left in place and
-- returned: the caller files it in dead (file_due.lua) with the one builder of dead
-- entries, rather than retrying it forever. An entry whose queue can't be written (a key
-- of the wrong type) stays where it is, and doesn't hold up the rest.
declare(5)
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", tonumber(ARGV[4] or "0"),
  tonumber(ARGV[2]))
-- Each job's queue and list, named before anything is written.
local queues, lists = {}, {}
for i, job in ipairs(due) do
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["class"]) == "string" then
    local queue = ARGV[3]
    if type(decoded["queue"]) == "string" and decoded["queue"] ~= "" then
      queue = decoded["queue"]
    end
    queues[i], lists[i] = queue, declared_key("queue", queue .. level_suffix(decoded))
  end
end
local need = needs_reply()
if need then return need end
local moved, bad, stuck, why = 0, {}, 0, ""
for i, job in ipairs(due) do
  if lists[i] then
    local queue = queues[i]
    local pushed = redis.pcall("LPUSH", lists[i], job)
    if type(pushed) == "number" then
      redis.pcall("SADD", KEYS[2], queue)
      moved = moved + 1
    else
      if stuck == 0 then why = pushed["err"] or "" end
      stuck = stuck + 1
      job = nil
    end
  else
    table.insert(bad, job)
    job = nil
  end
  if job then
    redis.call("ZREM", KEYS[1], job)
  end
end
if moved > 0 then
  wake(KEYS[3])
end
return {moved, bad, stuck, why}
