--! include _wake
-- A unique job's push: takes the lock and writes the job in one step, or writes nothing
-- when the lock is held (a duplicate).
-- KEYS[1] = lock: the unique lock
-- KEYS[2] = target: the queue (or schedule)
-- KEYS[3] = queues: the known-queues set
-- ARGV[1] = jid: the job's id
-- ARGV[2] = ttl: the lock's TTL (s)
-- ARGV[3] = payload: the job
-- ARGV[4] = at: run-at epoch for the schedule, or "" for the queue
-- ARGV[5] = queue: the queue's name
if not redis.call("SET", KEYS[1], ARGV[1], "NX", "EX", ARGV[2]) then
  return 0
end
if ARGV[4] ~= "" then
  redis.call("ZADD", KEYS[2], ARGV[4], ARGV[3])
else
  redis.call("LPUSH", KEYS[2], ARGV[3])
  redis.call("SADD", KEYS[3], ARGV[5])
  wake((string.gsub(KEYS[3], "queues$", "wake"))) -- "<ns>:queues" -> "<ns>:wake"
end
return 1
