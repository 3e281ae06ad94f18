-- inflight.lua: the live slots of one concurrency bucket (bucket.lua, "In
-- flight"): those whose expiry is after Redis TIME. It reads only.
--
-- KEYS[1]  the bucket's key
-- Reply: the number of live slots.
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now), '+inf')
