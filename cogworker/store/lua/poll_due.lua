--! include _wake
-- Moves due entries of a sorted set (schedule or retry) onto their queues.
-- KEYS[1] = the sorted set, KEYS[2] = the known-queues set.
-- ARGV[1] = now (epoch s), ARGV[2] = batch size, ARGV[3] = queue key prefix,
-- ARGV[4] = default queue, ARGV[5] = how many due entries to skip (ones the caller
-- already found stuck).
-- Returns {moved, {entries that are not a job object...}, stuck, the error that left the
-- first one stuck or ""}. The payload is pushed exactly as stored (re-encoding it in Lua
-- would round big numbers). An entry that is not a job object is left in place and
-- returned: the caller files it in dead (file_due.lua) with the one builder of dead
-- entries, rather than retrying it forever. An entry whose queue can't be written (a key
-- of the wrong type) stays where it is, and doesn't hold up the rest.
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", tonumber(ARGV[5] or "0"),
  tonumber(ARGV[2]))
local moved, bad, stuck, why = 0, {}, 0, ""
for _, job in ipairs(due) do
  local ok, decoded = pcall(cjson.decode, job)
  if ok and type(decoded) == "table" and type(decoded["class"]) == "string" then
    local queue = ARGV[4]
    if type(decoded["queue"]) == "string" and decoded["queue"] ~= "" then
      queue = decoded["queue"]
    end
    local pushed = redis.pcall("LPUSH", ARGV[3] .. queue, job)
    if type(pushed) == "number" then
      redis.pcall("SADD", KEYS[2], queue)
      moved = moved + 1
    else
      if stuck == 0 then why = pushed["err"] or "" end
      stuck = stuck + 1
      job = nil
    end
  else
    table.insert(bad, job)
    job = nil
  end
  if job then
    redis.call("ZREM", KEYS[1], job)
  end
end
if moved > 0 then
  wake((string.gsub(ARGV[3], "queue:$", "wake"))) -- "<ns>:queue:" -> "<ns>:wake"
end
return {moved, bad, stuck, why}
