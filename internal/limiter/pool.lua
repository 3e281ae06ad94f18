-- pool.lua: the Region's pools of a request's global buckets (global.go),
-- around charge.lua: this file runs before bucket.lua,
-- pool_after.lua after charge.lua.
--
-- A global bucket's budget is shared by every Region through a ledger; a
-- Region decides from the tokens it leased from the ledger and has not
-- spent, its pool. A pool is a key of its own, an integer (missing: 0),
-- beside the bucket's key under the same hash tag; the request's regional
-- buckets are charged as ever, and a pool is charged only with them.
--
-- A Region cut off from the ledger admits a fail-open bucket's requests
-- from its allowance instead: a counter of its own, never put in the pool
-- and never given to the ledger, so an allowance token can never be taken
-- for a ledger token.
--
-- KEYS[1..n]          the buckets' keys (bucket.lua)
-- KEYS[n+2j-1]        pool j's level, one per global bucket, in bucket order
-- KEYS[n+2j]          pool j's allowance counter (tokens admitted from it)
-- ARGV[1..4n+1]       as bucket.lua
-- ARGV[4n+2j]         pool j's allowance: 0 admits from the pool only;
--                     a > 0 admits from the pool when it holds the cost,
--                     else from the allowance while it has counted less
--                     than a - cost
-- ARGV[4n+2j+1]       the allowance counter's expiry, Unix ms
-- ARGV[4n+2m+2]       m
--
-- The pools' keys and arguments are taken off KEYS and ARGV first, so
-- bucket.lua reads the layout it always does. A pool that can't pay the
-- cost denies at once, before any bucket is read or written:
--   p <j> <level>   pool j (1-based among the pools) holds <level> tokens
-- Otherwise the reply is charge.lua's, followed, when it allows, by each
-- pool's level after its charge (a DECRBY, which keeps the expiry) and a
-- mask of the pools charged to their allowance (bit j-1):
--   <charge.lua's reply> <level 1> ... <level m> <allowance mask>
local pm = tonumber(ARGV[#ARGV])
ARGV[#ARGV] = nil
local pools, credits, allow, cexp = {}, {}, {}, {}
for j = pm, 1, -1 do
	credits[j] = KEYS[#KEYS]
	KEYS[#KEYS] = nil
	pools[j] = KEYS[#KEYS]
	KEYS[#KEYS] = nil
	cexp[j] = ARGV[#ARGV]
	ARGV[#ARGV] = nil
	allow[j] = tonumber(ARGV[#ARGV])
	ARGV[#ARGV] = nil
end
local from_credit = {}
do
	local c = tonumber(ARGV[1])
	for j = 1, pm do
		local a = tonumber(redis.call('GET', pools[j]) or '0') or 0
		if a < c then
			local used = tonumber(redis.call('GET', credits[j]) or '0') or 0
			if allow[j] > 0 and used + c <= allow[j] then
				from_credit[j] = true
			else
				return 'p ' .. j .. ' ' .. a
			end
		end
	end
end
