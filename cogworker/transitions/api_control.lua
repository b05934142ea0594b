-- An operator's request to a master or a single-process worker: quiet or stop, taken by
-- the process on its next heartbeat (heartbeat.take_control). Only a live process
-- (its record present) of one of those roles accepts it; a pending stop is never
-- downgraded to quiet.
-- KEYS[1] = process: process:<identity>
-- KEYS[2] = control: control:<identity>
-- ARGV[1] = command: "quiet" | "stop"
-- ARGV[2] = ttl: the request's TTL (s): a process gone before its next beat leaves no
-- request behind for long.
local role = redis.call("HGET", KEYS[1], "role")
if role ~= "master" and role ~= "worker" then
  return 0
end
-- A control key of another type (not ours to keep) is overwritten by the SET below.
if ARGV[1] == "quiet" and redis.pcall("GET", KEYS[2]) == "stop" then
  return 1
end
redis.call("SET", KEYS[2], ARGV[1], "EX", ARGV[2])
return 1
