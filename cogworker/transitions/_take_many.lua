-- Shared by fetch_ahead.lua and fetch_ahead_moved.lua (docs/architecture.md#lookahead-k): up to
-- k jobs onto the list's head, appended to indexes (each one's queue, as a position in
-- KEYS) and jobs. The queue choice is take_first's (_queues.lua), called once per queue:
-- an empty queue stays empty for the rest of the script (it is atomic), so each call
-- starts at the queue the last job came from, and the k jobs are the k first a strict
-- fetch would take one by one. Starts at KEYS[at]; returns the last job's queue (at when
-- none came).
local function take_many(list, at, k, paused, bad, indexes, jobs)
  while #jobs < k do
    local i, job = take_first(list, at, paused, bad)
    if not i then break end
    table.insert(indexes, i)
    table.insert(jobs, job)
    at = i
    -- The rest from that queue in one pop and one push, in the order k LMOVEs would leave
    -- them: a call from Lua costs Redis more than the list work of one job (K = 32).
    if #jobs < k then
      local got = redis.pcall("LMPOP", 1, KEYS[i], "RIGHT", "COUNT", k - #jobs)
      if type(got) == "table" and not got["err"] then
        local more = got[2]
        local pushed = redis.pcall("LPUSH", list, unpack(more))
        if type(pushed) == "table" and pushed["err"] then
          local back = {}  -- newest first, so that the oldest is at the fetch end again
          for b = #more, 1, -1 do table.insert(back, more[b]) end
          redis.call("RPUSH", KEYS[i], unpack(back))
          table.insert(bad, KEYS[i])
          table.insert(bad, pushed["err"])
          break
        end
        for _, more_job in ipairs(more) do
          table.insert(indexes, i)
          table.insert(jobs, more_job)
        end
      end
    end
  end
  return at
end
