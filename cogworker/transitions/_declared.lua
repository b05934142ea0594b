-- Keys named by data only Redis holds when the script runs
-- (docs/architecture.md#keys-named-by-data): a job's queue and unique lock, read from its
-- payload; a callback's queue, result and lock, read from its group's or batch's record;
-- a dead job's result, group and batch; the keys an index names when retention sheds
-- them. Each comes in the script's declared tail of KEYS (its last n), and its name,
-- "<kind>:<data>" (keys.DECLARED: the kind is the keys.py method that makes it, or key,
-- whose data is the key's own name, read from a record or an index: any of KEYS holds
-- it), in the same place of a run of ARGV.
-- A script asks (declared_key) for every such key its writes will use BEFORE it writes
-- anything: a key it was not given is noted, and it answers {0, "need", name...}
-- (needs_reply; 0: a caller reading a count or a flag reads "nothing done") having
-- written nothing, so its caller (declare.run_declared) declares those and calls again.
-- Looking a key up by what the record says is the check that the key declared is the
-- one the record names.
local declared_by_name, declared_missing, declared_any = {}, {}, {}

-- KEYS' last n are the declared keys, ARGV[first_arg..] (n of them) their names; n
-- absent: the names run to ARGV's end.
local function declare(first_arg, n)
  n = n or (#ARGV - first_arg + 1)
  local base = #KEYS - n
  for i = 1, n do declared_by_name[ARGV[first_arg + i - 1]] = KEYS[base + i] end
  for _, key in ipairs(KEYS) do declared_any[key] = true end
  return n
end

-- The key declared as kind:data, or nil (noted: the reply asks for it).
local function declared_key(kind, data)
  local name = kind .. ":" .. tostring(data)
  local key = declared_by_name[name]
  if kind == "key" and declared_any[data] then key = data end
  if not key and not declared_missing[name] then
    declared_missing[name] = true
    table.insert(declared_missing, name)
  end
  return key
end

-- A key a retention index names (_retain.lua's shed_key), if declared (else asked for).
local function declared_shed(name)
  return declared_key("key", name)
end

-- A read made while asking: nil where the read fails (a key of the wrong type), so the
-- asking never raises; the write that follows fails where it always did.
local function peek(...)
  local reply = redis.pcall(...)
  if type(reply) == "table" and reply.err then return nil end
  return reply
end

-- {0, "need", name...} if a key asked for was not declared, else nil.
local function needs_reply()
  if #declared_missing == 0 then return nil end
  local reply = {0, "need"}
  for _, name in ipairs(declared_missing) do table.insert(reply, name) end
  return reply
end
