--! include _wake
--! include _requeue_job
--! include _fence
-- A job's concurrency slots, released when it ends (before its ack can be written, so a
-- holder that dies holding one still lists the job and is fenced by whoever requeues it).
-- Only the holder's own slot: the member names the identity, so a fenced holder (refused
-- here) or a second release can't free a slot another holds. A slot freed promotes the
-- first job waiting on it from `schedule` to its queue's fetch end.
-- KEYS[1] = the process's fence, KEYS[2] = last_beat, KEYS[3] = schedule; then 3 keys per
-- limit: its record, held slots, waiting jobs.
-- ARGV[1] = identity, ARGV[2] = jid, ARGV[3] = queue key prefix, ARGV[4] = default queue,
-- ARGV[5] = unique lock prefix, ARGV[6] = seconds the job held its slots, ARGV[7] = how many.
-- Returns how many slots were released.
local refused = fenced(KEYS[1])
if refused then return refused end
beat(KEYS[2], ARGV[1])
local member = ARGV[1] .. "\t" .. ARGV[2]
local took = tonumber(ARGV[6]) or 0
local released = 0
for i = 0, tonumber(ARGV[7]) - 1 do
  local rec, held, waiting = KEYS[4 + i * 3], KEYS[5 + i * 3], KEYS[6 + i * 3]
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
        requeue_job(first, ARGV[3], ARGV[4], ARGV[5])
        redis.call("ZREM", KEYS[3], first)
        break
      end
    end
  end
end
return released
