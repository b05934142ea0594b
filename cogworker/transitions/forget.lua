-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = identities: in_progress_identities
-- KEYS[3] = last_beat: the last_beat hash
-- KEYS[4] = processes: the processes set
-- KEYS[5] = process: the process key
-- KEYS[6] = workers: the workers key
-- KEYS[7] = ahead: the look-ahead records
-- ARGV[1] = identity: the process's identity
-- Deregisters a process. Its registration as a list owner (and its last beat, which
-- orphan recovery needs) stays while anything is still on its list.
redis.call("SREM", KEYS[4], ARGV[1])
redis.call("DEL", KEYS[5], KEYS[6])
redis.call("HDEL", KEYS[7], ARGV[1])
if redis.call("LLEN", KEYS[1]) == 0 then
  redis.call("SREM", KEYS[2], ARGV[1])
  redis.call("HDEL", KEYS[3], ARGV[1])
  return 1
end
return 0
