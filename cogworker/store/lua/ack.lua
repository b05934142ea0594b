--! include _fence
-- KEYS[1] = in-progress list, KEYS[2] = the job's orphan counter, KEYS[3] = this
-- identity's fence, KEYS[4] = last_beat; ARGV[1] = the job, ARGV[2] = this identity
-- (its beat is refreshed). Refused (FENCED) if the identity was declared dead.
-- The job finished: its orphan count is moot (whatever crashes it sat through before
-- weren't its doing).
local refused = fenced(KEYS[3])
if refused then return refused end
beat(KEYS[4], ARGV[2])
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[2])
return 1
