-- bucket.lua: check and charge 1..N token buckets of one subject, atomically.
--
-- A bucket holds up to <burst> tokens and refills <limit> tokens every
-- <period>, continuously. Either every enforcing bucket has <cost> tokens and
-- every bucket that has them is charged, or nothing is written at all. The
-- clock is Redis TIME (microseconds); the caller never sends its own.
--
-- KEYS[i]   bucket i's key, <prefix>{<subject hash>}:<bucket id>. All keys
--           share the hash tag, so they live in one cluster slot.
-- ARGV[1]   one space-separated list of integers:
--             <cost> then, for each bucket i in KEYS order,
--             <limit> <period> <burst> <shadow>
--           cost    tokens to take from every bucket, >= 0; 0 peeks: decide
--                   as for cost 1, write nothing, reply per bucket
--           limit   tokens refilled per period, >= 0; 0 = blocked (never
--                   has a token, never written)
--           period  refill period in microseconds, > 0
--           burst   capacity in tokens, > 0
--           shadow  1 = never denies: charged when it has the tokens, a
--                   would-be deny is reported in the shadow mask; else 0
--
-- Stored value: the string "<tokens> <time>" written with SET ... PX, where
-- tokens is a float (fractions of a token are kept exactly enough: the
-- refill is limit * elapsed / period) and time is the Redis TIME in
-- microseconds at which tokens was true. The key expires when the bucket
-- would be full again; a missing key is a full bucket.
--
-- Reply: one space-separated string of integers
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

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local a = {}
for w in string.gmatch(ARGV[1], '%S+') do
	a[#a + 1] = tonumber(w)
end
local cost = a[1]
local need = cost
if need == 0 then
	need = 1
end

-- EPS absorbs float rounding in the refill: a bucket that holds cost tokens
-- up to 1e-6 is treated as holding them (the deficit is repaid by later
-- refill, so it never accumulates).
local EPS = 1e-6
local n = #KEYS
local tokens, stamp = {}, {}
local allowed = 1
local mask = 0
local lim, wait = 0, -2 -- the denying bucket and its wait (-1 = never)

for i = 1, n do
	local o = 1 + (i - 1) * 4
	local limit, period, burst = a[o + 1], a[o + 2], a[o + 3]
	local tk, ts = 0, now
	if limit > 0 then
		tk = burst
		local v = redis.call('GET', KEYS[i])
		if v then
			local sp = string.find(v, ' ', 1, true)
			local t0 = tonumber(string.sub(v, 1, sp - 1))
			local ts0 = tonumber(string.sub(v, sp + 1))
			if now > ts0 then
				tk = t0 + (now - ts0) * limit / period
			else
				-- TIME went backwards (failover): credit nothing, keep
				-- the later stamp so no interval is credited twice.
				tk, ts = t0, ts0
			end
			if tk > burst then
				tk = burst
			end
		end
	end
	tokens[i], stamp[i] = tk, ts
	if tk + EPS < need then
		local w = -1
		if limit > 0 and need <= burst then
			w = math.ceil((need - tk) * period / limit / 1000)
		end
		if a[o + 4] == 1 then
			mask = mask + 2 ^ (i - 1)
		else
			allowed = 0
			if wait ~= -1 and (w == -1 or w > wait) then
				lim, wait = i, w
			end
		end
	end
end

local function reset_ms(i)
	local o = 1 + (i - 1) * 4
	local limit, period, burst = a[o + 1], a[o + 2], a[o + 3]
	if limit == 0 or tokens[i] >= burst then
		return 0
	end
	return math.ceil((burst - tokens[i]) * period / limit / 1000)
end

local function whole(x)
	local w = math.floor(x + EPS)
	if w < 0 then
		return 0
	end
	return w
end

if allowed == 1 then
	wait = 0
	if cost > 0 then
		for i = 1, n do
			local o = 1 + (i - 1) * 4
			if a[o + 1] > 0 and tokens[i] + EPS >= cost then
				tokens[i] = tokens[i] - cost
				local ttl = reset_ms(i)
				if ttl < 1 then
					ttl = 1
				end
				redis.call('SET', KEYS[i], string.format('%.17g %.17g', tokens[i], stamp[i]), 'PX', ttl)
			end
		end
	end
	-- The limiting bucket: fewest whole tokens left, enforcing buckets
	-- first.
	local best = -1
	for pass = 0, 1 do
		for i = 1, n do
			if a[1 + (i - 1) * 4 + 4] == pass then
				local r = whole(tokens[i])
				if best < 0 or r < best then
					lim, best = i, r
				end
			end
		end
		if lim > 0 then
			break
		end
	end
end

local out = string.format('%d %d %d %d %d %d', allowed, lim, whole(tokens[lim]), reset_ms(lim), wait, mask)
if cost == 0 then
	local parts = { out }
	for i = 1, n do
		parts[#parts + 1] = string.format('%d %d', whole(tokens[i]), reset_ms(i))
	end
	out = table.concat(parts, ' ')
end
return out
