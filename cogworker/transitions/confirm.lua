--! include _fence
-- A process makes sure it was not declared dead before it starts a job it holds, when too
-- long has passed since Redis last saw it (it was frozen, or its reply sat unread): its
-- beat is refreshed, or it is refused (FENCED).
-- KEYS[1] = fence: its fence
-- KEYS[2] = last_beat: the last_beat hash
-- KEYS[3] = in_progress: its in-progress list
-- KEYS[4] = identities: in_progress_identities
-- ARGV[1] = identity: its identity
-- A fenced process's list can still receive a job from a blocking move sent before the
-- fence: the list stays registered, so orphan recovery finds that job and requeues it.
local refused = fenced(KEYS[1])
if refused then
  if redis.call("LLEN", KEYS[3]) > 0 then
    redis.pcall("SADD", KEYS[4], ARGV[1])
  end
  return refused
end
beat(KEYS[2], ARGV[1])
return 1
