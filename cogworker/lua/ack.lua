-- KEYS[1] = in-progress list, KEYS[2] = the job's orphan counter; ARGV[1] = the job.
-- The job finished: its orphan count is moot (whatever crashes it sat through before
-- weren't its doing).
redis.call("LREM", KEYS[1], 1, ARGV[1])
redis.pcall("DEL", KEYS[2])
return 1
