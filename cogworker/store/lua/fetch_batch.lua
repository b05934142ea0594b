--! include _fence
--! include _queues
-- A look-ahead fetch of up to k jobs in one round trip, with every due ack riding on it
-- (docs/architecture.md#batch). The queue choice is fetch.lua's (_queues.lua), called
-- once per job: an empty queue stays empty for the rest of this script (it is atomic),
-- so each call starts at the queue the last job came from, and the k jobs are the k
-- first a strict fetch would take one by one.
-- KEYS[1] = in-progress list, KEYS[2] = this identity's fence, KEYS[3] = last_beat,
-- KEYS[4..3+m] = the orphan counters of the m acks, KEYS[4+m..] = queues in order.
-- ARGV[1] = m, ARGV[2] = k, ARGV[3] = the look-ahead records, ARGV[4] = this identity,
-- ARGV[5] = the fetch's number, ARGV[6] = the identity whose beat is refreshed (or ""),
-- ARGV[7] = the paused set, ARGV[8] = the queue key prefix, ARGV[9..8+m] = the acks,
-- ARGV[9+m] = since (fetch.lua's ARGV[9]; absent = "").
-- Refused (FENCED) before anything, the acks included, if the identity was declared dead.
-- Returns {queue indexes, jobs, unreadable queues with Redis's error, the wake ID the
-- worker learns empty queues at or "", the paused names, 1 if stale (nothing taken) else
-- 0}; records "<number>:<n>:0" in the look-ahead records when it took n jobs (else
-- deletes the record).
local refused = fenced(KEYS[2])
if refused then return refused end
beat(KEYS[3], ARGV[6])
local m = tonumber(ARGV[1])
for i = 1, m do
  -- "-1", a string: a Lua number would be formatted (printf %.14g) on every call
  redis.call("LREM", KEYS[1], "-1", ARGV[8 + i])  -- an acked job is near the tail
end
-- Their orphan counters in one command: a call from Lua costs more than the key's delete.
if m > 0 then redis.pcall("DEL", unpack(KEYS, 4, 3 + m)) end
local since = ARGV[9 + m] or ""
local newest, stale = wake_moved(since, ARGV[8])
if stale then
  redis.call("HDEL", ARGV[3], ARGV[4])
  return {{}, {}, {}, newest, {}, 1}
end
local paused, names = paused_keys(ARGV[7], ARGV[8], since)
local first = 4 + m
local k = tonumber(ARGV[2])
local indexes, jobs, bad = {}, {}, {}
local at = first
while #jobs < k do
  local i, job = take_first(KEYS[1], at, paused, bad)
  if not i then break end
  table.insert(indexes, i - first + 1)
  table.insert(jobs, job)
  at = i
  -- The rest from that queue in one pop and one push, in the order k LMOVEs would leave
  -- them: a call from Lua costs Redis more than the list work of one job (K = 32).
  if #jobs < k then
    local got = redis.pcall("LMPOP", 1, KEYS[i], "RIGHT", "COUNT", k - #jobs)
    if type(got) == "table" and not got["err"] then
      local more = got[2]
      local pushed = redis.pcall("LPUSH", KEYS[1], unpack(more))
      if type(pushed) == "table" and pushed["err"] then
        local back = {}  -- newest first, so that the oldest is at the fetch end again
        for b = #more, 1, -1 do table.insert(back, more[b]) end
        redis.call("RPUSH", KEYS[i], unpack(back))
        table.insert(bad, KEYS[i])
        table.insert(bad, pushed["err"])
        break
      end
      for _, more_job in ipairs(more) do
        table.insert(indexes, i - first + 1)
        table.insert(jobs, more_job)
      end
    end
  end
end
if #jobs > 0 then
  redis.call("HSET", ARGV[3], ARGV[4], ARGV[5] .. ":" .. #jobs .. ":0")
else
  redis.call("HDEL", ARGV[3], ARGV[4])
end
-- Every queue before the last job's was empty (all of them when fewer than k came).
newest = learned_at(since, newest, ARGV[8], at ~= first or #jobs < k)
return {indexes, jobs, bad, newest, names, 0}
