--! include _wake
--! include _requeue_job
--! include _fence
--! include _ahead
-- A child's look-ahead jobs, not started, back on their queues (the child is stopping or
-- going quiet). KEYS[1..2], ARGV[1..2] as in take_ahead.lua, KEYS[3] = the child's fence
-- (refused, FENCED, if it was declared dead: its list was requeued); ARGV[3] = queue key prefix,
-- ARGV[4] = default queue, ARGV[5] = unique lock prefix, ARGV[6] = how many of the fetch's
-- jobs the child started ("" = 0). Returns how many went back (0: none).
local refused = fenced(KEYS[3])
if refused then return refused end
local number, n, t = ahead_record(KEYS[1], ARGV[1])
if number ~= ARGV[2] then return 0 end
local left = n - t - (tonumber(ARGV[6]) or 0)
local moved = 0
-- The head is the newest: pushed first, so the oldest ends nearest the fetch end.
while moved < left do
  local job = redis.call("LINDEX", KEYS[2], 0)
  if not job then break end
  -- Written where it goes before it leaves the list: an error in between keeps it listed.
  requeue_job(job, ARGV[3], ARGV[4], ARGV[5])
  redis.call("LPOP", KEYS[2])
  moved = moved + 1
end
redis.call("HDEL", KEYS[1], ARGV[1])
return moved
