--! include _fence
--! include _queues
-- The fast fetch (docs/architecture.md#fetch): this script runs last in one MULTI after
--   LREM <list> -1 <ack>                 (only with an ack riding, only while the lease holds)
--   LPUSH <list> <mark>
--   LMOVE <guessed queue> <list> RIGHT LEFT
-- so that no payload enters Lua: Lua hashes every byte of each string it is handed
-- (about 1.5 µs per KB, 150 µs for a 100 KB job, against 10-30 µs for the plain commands).
-- It checks everything fetch.lua checks and undoes the move when it must not stand.
-- KEYS[1] = in_progress: as in fetch.lua
-- KEYS[2] = orphans: as in fetch.lua
-- KEYS[3] = fence: as in fetch.lua
-- KEYS[4] = last_beat: as in fetch.lua
-- KEYS[5] = wake: as in fetch.lua
-- KEYS[6] = paused: as in fetch.lua
-- KEYS[7] = ahead: as in fetch.lua
-- KEYS[8..] = queues: as in fetch.lua
-- ARGV[1] = acked: "1" when an ack rode on it (its LREM is the plain command above; the
-- orphan counter is deleted here, behind the fence)
-- ARGV[2] = block: as in fetch.lua
-- ARGV[3] = owner: as in fetch.lua
-- ARGV[4] = number: as in fetch.lua
-- ARGV[5] = identity: as in fetch.lua
-- ARGV[6] = queue_prefix: as in fetch.lua
-- ARGV[7] = mark: the mark
-- ARGV[8] = guess: the guessed queue's index in KEYS
-- ARGV[9] = since: fetch.lua's since (absent = "")
-- Returns as fetch.lua, but the job is nil when it is the LMOVE's own reply (it stands):
-- never "", which is a job too (an empty entry, filed in dead as not JSON).
local list = KEYS[1]
local guess = tonumber(ARGV[8])
-- pcall: a list of the wrong type moved nothing (the loop below reports it, as fetch.lua).
local at = redis.pcall("LPOS", list, ARGV[7], "MAXLEN", 2)
if type(at) ~= "number" then at = nil end
local moved = at == 1
if at then redis.call("LREM", list, 1, ARGV[7]) end
local function undo()
  -- The job goes back to the fetch end of its queue, as if never moved (it enters Lua:
  -- only when fenced, paused, or a queue before the guess has a job).
  redis.call("LMOVE", list, KEYS[guess], "LEFT", "RIGHT")
  moved = false
end
local refused = fenced(KEYS[3])
if refused then
  if moved then undo() end
  return refused
end
beat(KEYS[4], ARGV[5])
if ARGV[1] ~= "" then redis.pcall("DEL", KEYS[2]) end
local ahead = ARGV[3] ~= "" and KEYS[7] or ""
local since = ARGV[9] or ""
local newest, stale = wake_moved(since, KEYS[5])
if stale then
  if moved then undo() end
  return stale_reply(ahead, ARGV[3], newest)
end
local paused, names = paused_keys(KEYS[6], ARGV[6], since, 8)
-- Strict order: every queue tried before the guess this time must be empty (or paused).
if moved and out_of_order(8, guess, paused) then undo() end
if moved then
  if ahead ~= "" then redis.call("HSET", ahead, ARGV[3], ARGV[4]) end
  -- false (nil to the client): the job is the LMOVE's reply
  return {guess - 7, false, "", learned_at(since, newest, KEYS[5], guess ~= 8), names}
end
-- The guess was empty, paused or not first: fetch.lua's choice (the job enters Lua here).
local bad = {}
local reply
local at, job = take_first(list, 8, paused, bad)
newest = learned_at(since, newest, KEYS[5], at ~= 8)
if at then
  reply = {at - 7, job, "", newest, names}
  if ahead ~= "" then redis.call("HSET", ahead, ARGV[3], ARGV[4]) end
else
  reply = {0, "", went_dry(ahead, ARGV[3], ARGV[2] == "1" and KEYS[5] or "", newest), newest, names}
end
for _, item in ipairs(bad) do table.insert(reply, item) end
return reply
