--! include _push_job
-- A single enqueue of a small job (docs/architecture.md#enqueue), in one command: the
-- push, the known-queues set, and the wake stream only when this push made the queue
-- non-empty. A worker blocks on the stream only after a fetch found every queue of it
-- empty, reading the stream's newest ID in that same step; so the push that then makes
-- one of them non-empty wakes it, and later pushes find it awake (or fetching).
-- KEYS[1] = queue_key: the queue
-- KEYS[2] = queues: the known-queues set
-- KEYS[3] = wake: the wake stream
-- KEYS[4..] = status(bucket): with job status on (docs/architecture.md#status-buckets),
-- enq:<hour>; else none
-- ARGV[1] = job: the job
-- ARGV[2] = queue: the queue's name
-- ARGV[3..] = status(jid, record, ttl): with job status on, the jid, its record, the
-- bucket's TTL ('' = set already); else none
-- Returns the queue's length.
-- Best-effort side writes (pcall), as in the client's pipeline: a key of the wrong type
-- there must not make a written job look unwritten.
local n = push_job(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
queued_status(KEYS[4], ARGV[3], ARGV[4], ARGV[5])
return n
