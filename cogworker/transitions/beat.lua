--! include _fence
-- Heartbeat records of one or more processes (a master beats for itself and its
-- children), in one step. A fenced process (declared dead, its list requeued) is skipped
-- and named in the reply: its master must stop it.
-- KEYS[1] = processes: the processes set
-- KEYS[2] = last_beat: the last_beat hash
-- KEYS[3] = identities: in_progress_identities
-- KEYS[4..3+3n] = beating(key, workers, fence): for each of the n processes, its process
-- key, its workers key and its fence
-- KEYS[4+3n..] = marks(key): the cancel mark of each job the records say run now
-- ARGV[1] = ttl: the process key's TTL (s)
-- ARGV[2] = n (derived): how many processes
-- ARGV[3..2+4n] = beating(identity, owns, record, running): for each process, its
-- identity, "1" if it owns an in-progress list, its record (a JSON object of strings),
-- what it runs (the same, or "" for nothing)
-- ARGV[3+4n..] = marks(jid, identity): for each cancel mark, its job and the process
-- running it (a mark of a process refused here is not looked at)
-- Returns {the fenced identities, the jids running now that carry a cancel mark}: the
-- beat is how a running job hears of its cancel (docs/architecture.md#cancel), with no
-- round trip of its own.
-- Every write is best-effort (pcall): one key of the wrong type never stops the others.
-- But Redis refusing writes altogether (OOM, READONLY) is an outage the caller must see:
-- the first such refusal ends the script with that error.
local function write(...)
  local reply = redis.pcall(...)
  if type(reply) == "table" and reply["err"] then
    local code = string.match(reply["err"], "^(%u+)")
    if code == "OOM" or code == "READONLY" then
      error(reply)
    end
  end
  return reply
end

local function hset_json(key, json)
  local ok, fields = pcall(cjson.decode, json)
  if not ok or type(fields) ~= "table" then return end
  local flat = {}
  for name, value in pairs(fields) do
    table.insert(flat, name)
    table.insert(flat, tostring(value))
  end
  if #flat > 0 then write("HSET", key, unpack(flat)) end
end

local refused, cancelled = {}, {}
local count = tonumber(ARGV[2])
local fenced_now = {}
for i = 0, count - 1 do
  local identity, running = ARGV[3 + 4 * i], ARGV[6 + 4 * i]
  local process_key, workers_key = KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  if fenced(KEYS[6 + 3 * i]) then
    table.insert(refused, identity)
    fenced_now[identity] = true
  else
    write("SADD", KEYS[1], identity)
    hset_json(process_key, ARGV[5 + 4 * i])
    redis.pcall("EXPIRE", process_key, ARGV[1])
    beat(KEYS[2], identity)
    if ARGV[4 + 4 * i] == "1" then
      redis.pcall("SADD", KEYS[3], identity)
    end
    if running ~= "" then
      hset_json(workers_key, running)
      redis.pcall("EXPIRE", workers_key, ARGV[1])
    else
      redis.pcall("DEL", workers_key)
    end
  end
end
-- Its job, and with --concurrency the others in flight: the caller named their marks.
local first_mark, first_arg = 4 + 3 * count, 3 + 4 * count
for m = 0, #KEYS - first_mark do
  local jid, identity = ARGV[first_arg + 2 * m], ARGV[first_arg + 2 * m + 1]
  if not fenced_now[identity] and redis.call("EXISTS", KEYS[first_mark + m]) == 1 then
    table.insert(cancelled, jid)
  end
end
return {refused, cancelled}
