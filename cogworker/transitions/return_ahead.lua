--! include _wake
--! include _declared
--! include _requeue_job
--! include _fence
--! include _ahead
-- A child's look-ahead jobs, not started, back on their queues (the child is stopping or
-- KEYS[1] = ahead: the look-ahead records
-- KEYS[2] = in_progress: the child's in-progress list
-- KEYS[3] = fence: the child's fence (refused, FENCED, if it was declared dead: its list
-- was requeued)
-- KEYS[4] = wake: the wake stream
-- KEYS[5..] = declared(key): the lists ("queue:<list>") and unique locks ("unique:<digest>")
-- the jobs' payloads name (_declared.lua), each named by the ARGV beside it
-- ARGV[1] = owner: the child's identity
-- ARGV[2] = number: the number of its look-ahead fetch
-- ARGV[3] = default_queue: the queue of a job that names none
-- ARGV[4] = started: how many of the fetch's jobs the child started ("" = 0)
-- ARGV[5..] = declared(name): the names of KEYS[5..], in order
-- Returns how many went back (0: none), or {0, "need", name...} (nothing written) if a key
-- a job names wasn't given.
local refused = fenced(KEYS[3])
if refused then return refused end
local number, n, t = ahead_record(KEYS[1], ARGV[1])
if number ~= ARGV[2] then return 0 end
local left = n - t - (tonumber(ARGV[4]) or 0)
declare(5)
if left > 0 then
  for _, job in ipairs(redis.call("LRANGE", KEYS[2], 0, left - 1)) do requeue_needs(job, ARGV[3]) end
end
local need = needs_reply()
if need then return need end
local moved = 0
-- The head is the newest: pushed first, so the oldest ends nearest the fetch end.
while moved < left do
  local job = redis.call("LINDEX", KEYS[2], 0)
  if not job then break end
  -- Written where it goes before it leaves the list: an error in between keeps it listed.
  requeue_job(job, ARGV[3], KEYS[4])
  redis.call("LPOP", KEYS[2])
  moved = moved + 1
end
redis.call("HDEL", KEYS[1], ARGV[1])
return moved
