--! include _wake
--! include _declared
--! include _requeue_job
--! include _fence
-- A job's concurrency slots, released when it ends (before its ack can be written, so a
-- holder that dies holding one still lists the job and is fenced by whoever requeues it).
-- Only the holder's own slot: the member names the identity, so a fenced holder (refused
-- here) or a second release can't free a slot another holds. A slot freed promotes the
-- first job waiting on it from `schedule` to its queue's fetch end.
-- KEYS[1] = fence: the process's fence
-- KEYS[2] = last_beat: the last_beat hash
-- KEYS[3] = schedule: the schedule
-- KEYS[4] = wake: the wake stream
-- KEYS[5..] = held(record, slots, waiting): 3 keys per limit: its record, held slots,
-- waiting jobs
-- KEYS[5+3c..] = declared(key): after the c limits' keys, the list ("queue:<list>") and
-- unique lock ("unique:<digest>") of each waiting job a freed slot promotes
-- (_declared.lua), each named by the ARGV beside it
-- ARGV[1] = identity: the process's identity
-- ARGV[2] = jid: the job's id
-- ARGV[3] = default_queue: the queue of a job that names none
-- ARGV[4] = held_for: seconds the job held its slots
-- ARGV[5] = count (derived): how many limits
-- ARGV[6..] = declared(name): the names of the declared keys, in order
-- Returns how many slots were released, or {0, "need", name...} (nothing written) if a
-- key of a job it would promote wasn't given.
local refused = fenced(KEYS[1])
if refused then return refused end
local member = ARGV[1] .. "\t" .. ARGV[2]
local count = tonumber(ARGV[5])
declare(6)
-- The jobs the freed slots promote, named before any write: per limit whose slot this
-- holder frees, the first of its 10 first waiters still parked and not promoted by an
-- earlier limit (the loop below takes the same one).
local freed, promoted = {}, {}
for i = 0, count - 1 do
  local held, waiting = KEYS[6 + i * 3], KEYS[7 + i * 3]
  if not freed[held] and redis.call("ZSCORE", held, member) then
    freed[held] = true
    for _, first in ipairs(redis.call("ZRANGE", waiting, 0, 9)) do
      if not promoted[first] and redis.call("ZSCORE", KEYS[3], first) then
        promoted[first] = true
        requeue_needs(first, ARGV[3])
        break
      end
    end
  end
end
local need = needs_reply()
if need then return need end
beat(KEYS[2], ARGV[1])
local took = tonumber(ARGV[4]) or 0
local released = 0
for i = 0, count - 1 do
  local rec, held, waiting = KEYS[5 + i * 3], KEYS[6 + i * 3], KEYS[7 + i * 3]
  if redis.call("ZREM", held, member) == 1 then
    released = released + 1
    local avg = tonumber(redis.call("HGET", rec, "avg"))
    avg = avg and (0.8 * avg + 0.2 * took) or took
    redis.call("HSET", rec, "avg", tostring(avg))
    for _ = 1, 10 do
      local first = redis.call("ZRANGE", waiting, 0, 0)[1]
      if not first then break end
      redis.call("ZREM", waiting, first)
      if redis.call("ZSCORE", KEYS[3], first) then -- still parked (the poller didn't move it yet)
        requeue_job(first, ARGV[3], KEYS[4])
        redis.call("ZREM", KEYS[3], first)
        break
      end
    end
  end
end
return released
