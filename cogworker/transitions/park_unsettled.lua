--! include _fence
-- KEYS[1] = in_progress: the in-progress list
-- KEYS[2] = unsettled: the unsettled list
-- KEYS[3] = fence: the list owner's fence (refused, FENCED, if it was declared dead: the
-- job was requeued)
-- ARGV[1] = job: the job as fetched
-- ARGV[2] = record: its {set, score, payload} record
-- A job that ran and failed but could not
-- be filed is handed over for any live process to file: never requeued (that would run
-- it again). Handed over first, removed second.
local refused = fenced(KEYS[3])
if refused then return refused end
if not redis.call("LPOS", KEYS[1], ARGV[1]) then
  return 0
end
redis.call("RPUSH", KEYS[2], ARGV[2])
redis.call("LREM", KEYS[1], 1, ARGV[1])
return 1
