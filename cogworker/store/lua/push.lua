--! include _push_job
-- A single enqueue of a small job (docs/architecture.md#enqueue), in one command: the
-- push, the known-queues set, and the wake stream only when this push made the queue
-- non-empty. A worker blocks on the stream only after a fetch found every queue of it
-- empty, reading the stream's newest ID in that same step; so the push that then makes
-- one of them non-empty wakes it, and later pushes find it awake (or fetching).
-- KEYS[1] = the queue, KEYS[2] = the known-queues set, KEYS[3] = the wake stream;
-- ARGV[1] = the job, ARGV[2] = the queue's name. Returns the queue's length.
-- With job status on (docs/architecture.md#status-buckets): KEYS[4] = enq:<hour>,
-- ARGV[3] = the jid, ARGV[4] = its record, ARGV[5] = the bucket's TTL ('' = set already).
-- Best-effort side writes (pcall), as in the client's pipeline: a key of the wrong type
-- there must not make a written job look unwritten.
local n = push_job(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])
queued_status(KEYS[4], ARGV[3], ARGV[4], ARGV[5])
return n
