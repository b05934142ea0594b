--! include _wake
--! include _workflow
-- An operator's cancel of a workflow by its id (docs/architecture.md#cancel): a chain's
-- (its last step's jid), a group's (g-...) or a chord's (its callback's jid). Written
-- before its jobs are cancelled one by one (cancel.lua), so whatever settles meanwhile
-- sees it: the mark stops a chain's next step (complete.lua reads it before the push),
-- the group's `failed` stops a chord's callback (wf_member fires none once it is set).
-- KEYS[1] = mark_key: the mark (cancelled:<id>)
-- KEYS[2] = index: the index of workflow marks (a sorted set, id -> when)
-- KEYS[3] = group: the group's state (group and chord) or any key (chain)
-- KEYS[4] = result: the chain's result (result:{id}) or any key (group and chord)
-- KEYS[5] = result_wait: its waiters' wake token, or any key
-- KEYS[6] = group_wait: the group's waiters' wake token, or any key (chain)
-- KEYS[7] = results_index: the kept results' index (retained:results)
-- KEYS[8..] = declared(key): the keys named by data (_declared.lua): a chord's callback's
-- result (its jid read from the group), and the old marks the count bound sheds (their
-- ids read from the index); asked for by a {0, "need", name...} reply
-- ARGV[1] = id: the workflow's id
-- ARGV[2] = kind: chain, group or chord
-- ARGV[3] = mark: the mark (JSON)
-- ARGV[4] = ttl: its TTL (s)
-- ARGV[5] = now: epoch s
-- ARGV[6] = most: how many marks the index keeps
-- ARGV[7] = result_ttl: the chain's result TTL (chain)
-- ARGV[8..] = declared(name): the declared keys' names ("<kind>:<data>"), in their order
-- Returns 1 if it stopped something (a group not yet done or failed, a chain), else 0
-- (nothing written: an unknown, finished or already failed group); {0, "need", name...}
-- (nothing written) for keys to declare.
local id, kind, now = ARGV[1], ARGV[2], ARGV[5]
local cutoff = tostring(tonumber(now) - tonumber(ARGV[4]))
declare(8)
wf_results_index = KEYS[7]

-- The ids whose marks the count bound sheds once id's is added and those older than
-- the TTL dropped: the index's oldest (by score, then id) past ARGV[6].
local function shed_ids()
  local kept = redis.call("ZCOUNT", KEYS[2], cutoff, "+inf") + 1
  local own = redis.call("ZSCORE", KEYS[2], id)
  if own and tonumber(own) >= tonumber(cutoff) then kept = kept - 1 end
  local over = kept - tonumber(ARGV[6])
  if over <= 0 then return {} end
  local rows = redis.call("ZRANGEBYSCORE", KEYS[2], cutoff, "+inf", "WITHSCORES", "LIMIT", 0, over + 1)
  local order, placed, at = {}, false, tonumber(now)
  for i = 1, #rows, 2 do
    local score = tonumber(rows[i + 1])
    if rows[i] ~= id then
      if not placed and (at < score or (at == score and id < rows[i])) then
        table.insert(order, id)
        placed = true
      end
      table.insert(order, rows[i])
    end
  end
  if not placed then table.insert(order, id) end
  return {unpack(order, 1, over)}
end

-- Before any write: what it will touch beyond its fixed keys.
local g = KEYS[3]
if kind ~= "chain" then
  if redis.call("EXISTS", g) == 0 or redis.call("HEXISTS", g, "done_at") == 1 then return 0 end
  if redis.call("HEXISTS", g, "failed") == 1 then return 0 end
  local cbj = redis.call("HGET", g, "cbj")
  if cbj and cbj ~= "" then wf_result_needs(cbj) end
end
for _, old in ipairs(shed_ids()) do declared_key("cancelled", old) end
local need = needs_reply()
if need then return need end

local failure = wf_failure({jid = id, class = "", error_class = "cogworker.Cancelled",
                            error_message = "cancelled (cogworker.api.cancel of " .. kind .. " " .. id .. ")"}, now)
if kind == "chain" then
  wf_result_at(KEYS[4], KEYS[5], KEYS[7], failure, ARGV[7], now, {})
else
  redis.call("HSETNX", g, "failed", "cancelled")
  for i = 1, #failure, 2 do redis.call("HSET", g, "f:" .. failure[i], failure[i + 1]) end
  wf_notify(KEYS[6])
  local cbj = redis.call("HGET", g, "cbj")
  if cbj and cbj ~= "" then wf_result(cbj, failure, redis.call("HGET", g, "ttl"), now, {}) end
end
-- The mark, bounded as a job's: by age (its TTL; the index drops what is older) and by
-- count (past ARGV[6] marks, the oldest go, with their keys: each declared, as shed_ids
-- foresaw; one it did not, were Lua's order of two ids at one score Redis's not, would
-- be left to its TTL).
redis.call("SET", KEYS[1], ARGV[3], "EX", ARGV[4])
redis.call("ZADD", KEYS[2], now, id)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", "(" .. cutoff)
local over = redis.call("ZCARD", KEYS[2]) - tonumber(ARGV[6])
if over > 0 then
  for _, old in ipairs(redis.call("ZRANGE", KEYS[2], 0, over - 1)) do
    local key = declared_key("cancelled", old)
    if key then redis.call("DEL", key) end
  end
  redis.call("ZREMRANGEBYRANK", KEYS[2], 0, over - 1)
end
return 1
