--! include _wake
--! include _level
--! include _declared
-- retry_all in chunks: the first chunk entries of a sorted set (after skipping those an
-- earlier call could not move) onto their queues now, each written first and removed
-- second. An entry that is not a job object stays where it is (an operator deletes it)
-- and is counted as skipped, so the next call steps over it.
-- KEYS[1] = zset: the sorted set
-- KEYS[2] = queues: the known-queues set
-- KEYS[3] = wake: the wake stream
-- KEYS[4..] = declared(key): the lists of the entries' queues (or levels), each named by the
-- ARGV beside it ("queue:<list>", _declared.lua)
-- ARGV[1] = skip: entries to skip
-- ARGV[2] = chunk: the chunk size
-- ARGV[3] = default_queue: the queue of an entry that names none
-- ARGV[4..] = declared(name): the names of KEYS[4..], in order
-- Returns {moved, skipped, entries read}, or {0, "need", name...} (nothing written) if an
-- entry's list wasn't given.
declare(4)
local chunk = redis.call("ZRANGE", KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1)
-- Each job's queue and list, named before anything is written.
local queues, lists = {}, {}
for i, job in ipairs(chunk) do
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["class"]) == "string" then
    local queue = ARGV[3]
    if type(decoded["queue"]) == "string" and decoded["queue"] ~= "" then queue = decoded["queue"] end
    queues[i], lists[i] = queue, declared_key("queue", queue .. level_suffix(decoded))
  end
end
local need = needs_reply()
if need then return need end
local moved, skipped = 0, 0
for i, job in ipairs(chunk) do
  if lists[i] then
    local queue = queues[i]
    local pushed = redis.pcall("LPUSH", lists[i], job)
    if type(pushed) == "number" then
      redis.pcall("SADD", KEYS[2], queue)
      redis.call("ZREM", KEYS[1], job)
      moved = moved + 1
    else
      skipped = skipped + 1
    end
  else
    skipped = skipped + 1
  end
end
if moved > 0 then wake(KEYS[3]) end
return {moved, skipped, #chunk}
