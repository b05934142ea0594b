--! include _fence
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = orphans: the job's orphan counter
-- KEYS[3] = fence: this identity's fence
-- KEYS[4] = last_beat: the last_beat hash
-- ARGV[1] = job: the job as fetched
-- ARGV[2] = identity: this identity (its beat is refreshed)
-- Refused (FENCED) if the identity was declared dead.
-- The job finished: its orphan count is moot (whatever crashes it sat through before
-- weren't its doing).
local refused = fenced(KEYS[3])
if refused then return refused end
beat(KEYS[4], ARGV[2])
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[2])
return 1
