--! include _fence
--! include _queues
-- The fast fetch (docs/architecture.md#fetch): this script runs last in one MULTI after
--   LREM <list> -1 <ack>                 (only with an ack riding, only while the lease holds)
--   LPUSH <list> <mark>
--   LMOVE <guessed queue> <list> RIGHT LEFT
-- so that no payload enters Lua: Lua hashes every byte of each string it is handed
-- (about 1.5 µs per KB, 150 µs for a 100 KB job, against 10-30 µs for the plain commands).
-- It checks everything fetch.lua checks and undoes the move when it must not stand.
-- KEYS and ARGV[1..8] as in fetch.lua, except ARGV[1]: "1" when an ack rode on it (its
-- LREM is the plain command above; the orphan counter is deleted here, behind the fence).
-- ARGV[9] = the mark, ARGV[10] = the guessed queue's index in KEYS, ARGV[11] = since
-- (fetch.lua's ARGV[9]; absent = "").
-- Returns as fetch.lua, but the job is nil when it is the LMOVE's own reply (it stands):
-- never "", which is a job too (an empty entry, filed in dead as not JSON).
local list = KEYS[1]
local guess = tonumber(ARGV[10])
-- pcall: a list of the wrong type moved nothing (the loop below reports it, as fetch.lua).
local at = redis.pcall("LPOS", list, ARGV[9], "MAXLEN", 2)
if type(at) ~= "number" then at = nil end
local moved = at == 1
if at then redis.call("LREM", list, 1, ARGV[9]) end
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
beat(KEYS[4], ARGV[6])
if ARGV[1] ~= "" then redis.pcall("DEL", KEYS[2]) end
local since = ARGV[11] or ""
local newest, stale = wake_moved(since, ARGV[8])
if stale then
  if moved then undo() end
  return stale_reply(ARGV[3], ARGV[4], newest)
end
local paused, names = paused_keys(ARGV[7], ARGV[8], since)
-- Strict order: every queue tried before the guess this time must be empty (or paused).
if moved and out_of_order(5, guess, paused) then undo() end
if moved then
  if ARGV[3] ~= "" then redis.call("HSET", ARGV[3], ARGV[4], ARGV[5]) end
  -- false (nil to the client): the job is the LMOVE's reply
  return {guess - 4, false, "", learned_at(since, newest, ARGV[8], guess ~= 5), names}
end
-- The guess was empty, paused or not first: fetch.lua's choice (the job enters Lua here).
local bad = {}
local reply
local at, job = take_first(list, 5, paused, bad)
newest = learned_at(since, newest, ARGV[8], at ~= 5)
if at then
  reply = {at - 4, job, "", newest, names}
  if ARGV[3] ~= "" then redis.call("HSET", ARGV[3], ARGV[4], ARGV[5]) end
else
  reply = {0, "", went_dry(ARGV[3], ARGV[4], ARGV[2], newest), newest, names}
end
for _, item in ipairs(bad) do table.insert(reply, item) end
return reply
