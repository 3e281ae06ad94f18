-- pool_fill.lua: move tokens between a Region's pool and the ledger
-- (global.go) so that a write whose answer is lost can be told applied or
-- not: every move is fenced.
--
-- KEYS[1]  the pool: an integer, the tokens the Region holds
-- KEYS[2]  the move's fence: absent until the move or its cancel runs;
--          then the tokens the move moved, or "x" when it was cancelled
-- ARGV[1]  the operation:
--   fill <n> <exp>  add n tokens taken from the ledger (n > 0); exp is the
--                   pool's expiry, Unix ms (its window's end plus a margin)
--   drain           take every token out, to give them back; a pool in
--                   debt (below 0) is left as it is
--   resolve         settle a move whose answer was lost: a move that ran
--                   replies as it did; one that did not is cancelled, so a
--                   copy of it still on the way does nothing
-- ARGV[2], ARGV[3]  fill's n and exp
-- ARGV[#ARGV]       the fence's expiry, milliseconds from now
--
-- Reply: "<state> <n>": state "done" with the tokens moved (fill: added;
-- drain: taken out), "x" when the move was cancelled (n 0). A second copy
-- of a move replies as the first did and moves nothing.
local op, fence, ttl = ARGV[1], KEYS[2], ARGV[#ARGV]
local prior = redis.call('GET', fence)
if prior == 'x' then
	return 'x 0'
elseif prior then
	return 'done ' .. prior
end
if op == 'resolve' then
	redis.call('SET', fence, 'x', 'PX', ttl)
	return 'x 0'
end
local n = 0
if op == 'fill' then
	n = tonumber(ARGV[2])
	redis.call('INCRBY', KEYS[1], n)
	redis.call('PEXPIREAT', KEYS[1], ARGV[3])
elseif op == 'drain' then
	n = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
	if n > 0 then
		redis.call('DECRBY', KEYS[1], n)
	else
		n = 0
	end
else
	return redis.error_reply('pool_fill.lua: unknown operation ' .. tostring(op))
end
redis.call('SET', fence, n, 'PX', ttl)
return 'done ' .. n
