-- bucket.lua: check and charge 1..N token buckets of one subject, atomically.
--
-- A bucket holds up to <burst> tokens and refills <limit> tokens every
-- <period>, continuously. Either every enforcing bucket has <cost> tokens and
-- every bucket that has them is charged, or nothing is written at all. The
-- clock is Redis TIME (microseconds); the caller never sends its own.
--
-- KEYS[i]        bucket i's key, <prefix>{<subject hash>}:<bucket id>. All
--                keys share the hash tag, so they live in one cluster slot.
-- ARGV[1]        cost: tokens to take from every bucket, integer >= 0; 0
--                peeks: decide as for cost 1, write nothing, reply per bucket
-- ARGV[4i-2..4i+1], for bucket i:
--   limit        tokens refilled per period, integer >= 0; 0 = blocked (never
--                has a token, never written)
--   period       refill period in microseconds, integer > 0
--   burst        capacity in tokens, integer > 0
--   shadow       1 = never denies: charged when it has the tokens, a
--                would-be deny is reported in the shadow mask; 0 = enforcing
--
-- Stored value (GCRA form of the bucket): the time at which the bucket will
-- be full again, in microseconds since 2024-01-01 UTC, a float (a fraction
-- of a token is a fraction of period/limit). A bucket then holds
-- (now + burst*T - stored) / T tokens, T = period/limit microseconds per
-- token. The key expires (PX) when the bucket is full; a missing key is a
-- full bucket.
--
-- Reply: one string of space-separated integers (a string, not an array:
-- the caller parses it without an allocation per number)
--   <allowed> <index> <remaining> <reset> <retry> <shadow mask>
--   allowed      1 or 0
--   index        1-based index in KEYS of the limiting bucket: when denied
--                the enforcing bucket with the longest wait, when allowed
--                the enforcing bucket with the fewest tokens left (shadow
--                buckets count only when all are shadows)
--   remaining    whole tokens left in the limiting bucket after this call
--   reset        milliseconds until the limiting bucket is full again
--   retry        0 when allowed; else milliseconds until <cost> tokens are
--                available in every bucket; -1 when never (cost > burst or
--                limit 0)
--   shadow mask  bit i-1 set when shadow bucket i would have denied
-- followed, for a peek (cost 0) only, by " <remaining> <reset>" per bucket.

-- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless
-- told to replicate effects; since Redis 7 this call is a no-op.
if redis.replicate_commands then
	redis.replicate_commands()
end

local tonumber, ceil, floor = tonumber, math.ceil, math.floor
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
-- tonumber is strtod, a few hundred instructions a call: the usual cost 1
-- and a burst equal to the limit (same string, so the same interned Lua
-- string) are recognised without it.
local cost = ARGV[1] == '1' and 1 or tonumber(ARGV[1])
local need = cost
if need == 0 then
	need = 1
end

-- EPS absorbs float rounding: a bucket holding cost tokens up to 1e-6 is
-- treated as holding them (the deficit is repaid by later refill, so it
-- never accumulates).
local EPS = 1e-6
local n = #KEYS
-- One table for all buckets (this script's cost is mostly allocations):
-- st[3i-2] = when bucket i is full again (us), st[3i-1] = its tokens now,
-- st[3i] = us per token (0 when blocked). Presized for two buckets.
local st = { 0, 0, 0, 0, 0, 0 }
local allowed, mask, lim, wait = 1, 0, 0, -2 -- wait: the denying bucket's, -1 = never

for i = 1, n do
	local o = 4 * i - 2
	local limit = tonumber(ARGV[o])
	local at, h, T, burst = now, 0, 0, 0
	if limit > 0 then
		T = tonumber(ARGV[o + 1]) / limit
		burst = limit
		if ARGV[o + 2] ~= ARGV[o] then
			burst = tonumber(ARGV[o + 2])
		end
		local v = redis.call('GET', KEYS[i])
		if v then
			v = tonumber(v)
			if v > at then
				at = v -- else full: TIME may even have gone back (failover)
			end
		end
		h = (now - at) / T + burst
	end
	st[3 * i - 2], st[3 * i - 1], st[3 * i] = at, h, T
	if h + EPS < need then
		if ARGV[o + 3] == '1' then
			mask = mask + 2 ^ (i - 1)
		else
			allowed = 0
			-- The wait only matters on a deny: not computed otherwise.
			local w = -1
			if T > 0 and need <= burst then
				w = ceil((at + (need - burst) * T - now) / 1000)
				if w < 1 then
					w = 1
				end
			end
			if wait ~= -1 and (w == -1 or w > wait) then
				lim, wait = i, w
			end
		end
	end
end

if allowed == 1 then
	wait = 0
	-- Charge every bucket that has the tokens, and find the limiting one:
	-- fewest tokens left, enforcing buckets first.
	for i = 1, n do
		local T, h = st[3 * i], st[3 * i - 1]
		if cost > 0 and T > 0 and h + EPS >= cost then
			local at = st[3 * i - 2] + cost * T
			h = h - cost
			st[3 * i - 2], st[3 * i - 1] = at, h
			local ttl = ceil((at - now) / 1000)
			if ttl < 1 then
				ttl = 1
			end
			redis.call('SET', KEYS[i], at, 'PX', ttl)
		end
		if ARGV[4 * i + 1] == '0' and (lim == 0 or h < st[3 * lim - 1]) then
			lim = i
		end
	end
	if lim == 0 then
		for i = 1, n do
			if lim == 0 or st[3 * i - 1] < st[3 * lim - 1] then
				lim = i
			end
		end
	end
end

-- The reply; for a peek, every bucket's whole tokens left and milliseconds
-- until full follow. (No local function: creating its closure on every call
-- costs more than this loop.)
local out
for i = 0, n do
	local b = i
	if i == 0 then
		b = lim
	end
	local r = floor(st[3 * b - 1] + EPS)
	if r < 0 then
		r = 0
	end
	local reset = 0
	if st[3 * b] > 0 then
		reset = ceil((st[3 * b - 2] - now) / 1000)
		if reset < 0 then
			reset = 0
		end
	end
	if i == 0 then
		-- Every %d is a sprintf: constant fields are written out.
		if allowed == 1 then
			out = string.format('1 %d %d %d 0 %d', lim, r, reset, mask)
		else
			out = string.format('0 %d %d %d %d %d', lim, r, reset, wait, mask)
		end
		if cost > 0 then
			break
		end
	else
		out = out .. string.format(' %d %d', r, reset)
	end
end
return out
