-- pool_fill.lua: put tokens taken from the ledger into a Region's pool
-- (global.go), or take them all out to give them back.
--
-- KEYS[1]  the pool: an integer, the tokens the Region holds
-- ARGV[1]  tokens to add, >= 0; "drain" takes every token out instead
-- ARGV[2]  when the pool expires, Unix milliseconds (its window's end
--          plus a margin); ignored by a drain
--
-- Reply: the pool's level after the call; a drain's, the tokens it took
-- out (the key is gone after it).
if ARGV[1] == 'drain' then
	local a = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
	redis.call('DEL', KEYS[1])
	if a < 0 then
		a = 0
	end
	return a
end
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return v
