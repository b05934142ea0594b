-- Records a fired slot in the published schedule (for the UI), unless a later slot is
-- already recorded there (masters may report out of order).
-- KEYS[1] = schedule: the schedule hash
-- ARGV[1] = pjid: the entry's id
-- ARGV[2] = record: the record (JSON)
-- ARGV[3] = slot: epoch s
local current = redis.call("HGET", KEYS[1], ARGV[1])
if current then
  local ok, decoded = pcall(cjson.decode, current)
  if ok and type(decoded) == "table" and tonumber(decoded["last_slot"])
      and tonumber(decoded["last_slot"]) > tonumber(ARGV[3]) then
    return 0
  end
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return 1
