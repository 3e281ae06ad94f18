-- pool.lua: the Region's pools of a request's global buckets (global.go),
-- around charge.lua: this file's first part runs before bucket.lua, its
-- second (after the "-- #after" line) after charge.lua.
--
-- A global bucket's budget is shared by every Region through a ledger; a
-- Region decides from the tokens it leased from the ledger and has not
-- spent, its pool. A pool is a key of its own, an integer (missing: 0),
-- beside the bucket's key under the same hash tag; the request's regional
-- buckets are charged as ever, and a pool is charged only with them.
--
-- KEYS[1..n]      the buckets' keys (bucket.lua)
-- KEYS[n+1..n+m]  the pools, one per global bucket, in bucket order
-- ARGV[1..4n+1]   as bucket.lua
-- ARGV[4n+2]      m
--
-- The pools' keys and m are taken off KEYS and ARGV first, so bucket.lua
-- reads the layout it always does. A pool holding less than the cost
-- denies at once, before any bucket is read or written:
--   p <j> <level>   pool j (1-based among the pools) holds <level> tokens
-- Otherwise the reply is charge.lua's, followed, when it allows, by each
-- pool's level after its charge (a DECRBY, which keeps the expiry):
--   <charge.lua's reply> <level 1> ... <level m>
local pm = tonumber(ARGV[#ARGV])
ARGV[#ARGV] = nil
local pools = {}
for j = pm, 1, -1 do
	pools[j] = KEYS[#KEYS]
	KEYS[#KEYS] = nil
end
do
	local c = tonumber(ARGV[1])
	for j = 1, pm do
		local a = tonumber(redis.call('GET', pools[j]) or '0') or 0
		if a < c then
			return 'p ' .. j .. ' ' .. a
		end
	end
end
-- #after
if allowed == 1 then
	for j = 1, pm do
		out = out .. ' ' .. redis.call('DECRBY', pools[j], cs)
	end
end
return out
