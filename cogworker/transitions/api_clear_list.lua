-- Empties a queue and returns how many jobs it held. LLEN first: a key of another type
-- errors before anything is removed. UNLINK frees the list in the background (O(1) for
-- Redis's main thread, whatever the length).
-- KEYS[1] = queue: the queue
local n = redis.call("LLEN", KEYS[1])
redis.call("UNLINK", KEYS[1])
return n
