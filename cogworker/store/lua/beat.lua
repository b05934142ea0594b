--! include _fence
-- Heartbeat records of one or more processes (a master beats for itself and its
-- children), in one step. A fenced process (declared dead, its list requeued) is skipped
-- and named in the reply: its master must stop it.
-- KEYS[1] = processes, KEYS[2] = last_beat, KEYS[3] = in_progress_identities, then for
-- each process: its process key, its workers key, its fence.
-- ARGV[1] = the process key's TTL (s), then for each process: identity, "1" if it owns
-- an in-progress list, its record (a JSON object of strings), what it runs (the same,
-- or "" for nothing); last, the prefix of cancel marks (or absent).
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
local count = (#KEYS - 3) / 3
local cancel_prefix = ARGV[2 + 4 * count]
for i = 0, count - 1 do
  local identity = ARGV[2 + 4 * i]
  local process_key, workers_key = KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  if fenced(KEYS[6 + 3 * i]) then
    table.insert(refused, identity)
  else
    write("SADD", KEYS[1], identity)
    hset_json(process_key, ARGV[4 + 4 * i])
    redis.pcall("EXPIRE", process_key, ARGV[1])
    beat(KEYS[2], identity)
    if ARGV[3 + 4 * i] == "1" then
      redis.pcall("SADD", KEYS[3], identity)
    end
    if ARGV[5 + 4 * i] ~= "" then
      hset_json(workers_key, ARGV[5 + 4 * i])
      redis.pcall("EXPIRE", workers_key, ARGV[1])
      if cancel_prefix then
        local ok, running = pcall(cjson.decode, ARGV[5 + 4 * i])
        if ok and type(running) == "table" and type(running["jid"]) == "string" then
          -- its job, and with --concurrency the others in flight ("also", comma-separated)
          local jids = running["jid"] .. "," .. (type(running["also"]) == "string" and running["also"] or "")
          for jid in string.gmatch(jids, "[^,]+") do
            if redis.call("EXISTS", cancel_prefix .. jid) == 1 then
              table.insert(cancelled, jid)
            end
          end
        end
      end
    else
      redis.pcall("DEL", workers_key)
    end
  end
end
return {refused, cancelled}
