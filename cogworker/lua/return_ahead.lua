--! include _wake
--! include _requeue_job
--! include _fence
-- A child's look-ahead job, not started, back on its queue (the child is stopping or
-- going quiet). KEYS[1..2], ARGV[1..2] as in take_ahead.lua, KEYS[3] = the child's fence
-- (refused, FENCED, if it was declared dead: its list was requeued); ARGV[3] = queue key prefix,
-- ARGV[4] = default queue, ARGV[5] = unique lock prefix. Returns the job, or false.
local refused = fenced(KEYS[3])
if refused then return refused end
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then
  return false
end
local job = redis.call("LINDEX", KEYS[2], 0)
if not job then
  redis.call("HDEL", KEYS[1], ARGV[1])
  return false
end
-- Written where it goes before it leaves the list: an error in between keeps it listed.
requeue_job(job, ARGV[3], ARGV[4], ARGV[5])
redis.call("LPOP", KEYS[2])
redis.call("HDEL", KEYS[1], ARGV[1])
return job
