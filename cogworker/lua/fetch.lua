--! include _fence
-- Reliable fetch, with the previous job's ack riding along (one round trip per job).
-- KEYS[1] = in-progress list, KEYS[2] = orphan counter of the job being acked (or any
-- unused key of the namespace when there is none), KEYS[3] = this identity's fence,
-- KEYS[4] = last_beat, KEYS[5..] = queues in the order to try.
-- ARGV[1] = the previous job to acknowledge, or "". ARGV[2] = the wake stream, or "":
-- a worker of several queues blocks on it when nothing is waiting, from the ID returned
-- here, so a push landing between this script and that block still wakes it.
-- ARGV[3..5] = for a look-ahead fetch (sent while the previous job runs): the hash of
-- look-ahead records, this identity and the fetch's number. The record says that fetch
-- took a job, so a sibling that runs dry may take that job before it starts ("" when none).
-- ARGV[6] = this identity: its beat is refreshed here. Refused (FENCED) before anything,
-- the ack included, if the identity was declared dead.
-- ARGV[7] = the set of paused queue names, ARGV[8] = the queue key prefix: a paused
-- queue is skipped, fleet-wide, from the moment the operator's SADD lands (read here,
-- in the same step as the move, so no job of it is taken afterwards).
-- Returns {index of the queue or 0, job or "", last wake ID or ""}, then for each queue
-- key that could not be moved from, its name and Redis's error, so the caller can tell a
-- key of the wrong type (logged; one bad key never stops the other queues) from Redis
-- refusing writes (OOM, READONLY: an outage).
local refused = fenced(KEYS[3])
if refused then return refused end
beat(KEYS[4], ARGV[6])
if ARGV[1] ~= "" then
  redis.call("LREM", KEYS[1], 1, ARGV[1])
  redis.pcall("DEL", KEYS[2])
end
local bad = {}
local reply = nil
local paused = {}
if ARGV[7] and ARGV[7] ~= "" then
  local names = redis.pcall("SMEMBERS", ARGV[7])
  if type(names) == "table" and not names["err"] then
    for _, name in ipairs(names) do paused[ARGV[8] .. name] = true end
  end
end
for i = 5, #KEYS do
  local job = false
  if not paused[KEYS[i]] then
    job = redis.pcall("LMOVE", KEYS[i], KEYS[1], "RIGHT", "LEFT")
  end
  if type(job) == "string" then
    reply = {i - 4, job, ""}
    if ARGV[3] and ARGV[3] ~= "" then
      redis.call("HSET", ARGV[3], ARGV[4], ARGV[5])
    end
    break
  elseif type(job) == "table" and job["err"] then
    table.insert(bad, KEYS[i])
    table.insert(bad, job["err"])
  end
end
if not reply then
  if ARGV[3] and ARGV[3] ~= "" then
    redis.call("HDEL", ARGV[3], ARGV[4])
  end
  local last = ""
  if ARGV[2] ~= "" then
    last = "0-0"
    local newest = redis.pcall("XREVRANGE", ARGV[2], "+", "-", "COUNT", 1)
    if type(newest) == "table" and newest[1] then last = newest[1][1] end
  end
  reply = {0, "", last}
end
for _, item in ipairs(bad) do table.insert(reply, item) end
return reply
