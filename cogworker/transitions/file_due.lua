-- Files a due entry of a sorted set (schedule or retry) in another (dead), then removes
-- it: an entry the poller found is not a job object (poll_due.lua returns it).
-- KEYS[1] = zset: the sorted set it is in
-- KEYS[2] = dead: the dead set
-- ARGV[1] = entry: the entry as stored
-- ARGV[2] = score: its score in dead
-- ARGV[3] = filed: what to file
-- 0 if it is no longer there (another poller filed it): filing it too would make two.
if not redis.call("ZSCORE", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
redis.call("ZREM", KEYS[1], ARGV[1])
return 1
