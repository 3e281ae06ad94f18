-- charge_one.lua: charge.lua for the commonest request, one enforcing
-- token bucket with no admission floor (one rate rule: no quota, not a
-- shadow). Same arguments, stored form and reply as charge.lua; bucket.lua
-- describes them, and what is said there of a token bucket holds here.
-- script.go sends a request here only when it has that shape (chargeFor),
-- and TestChargeOneMatchesCharge (and its fuzz target) holds the two
-- scripts to the same replies and the same stored values, state by state.
-- A stored value is read by stored.lua's text, the same as bucket.lua's.
--
-- Why a script of its own: Redis runs a script's every instruction, and
-- charge.lua's loops, its table of bucket states and the branches for
-- quotas, shadows and floors cost a one-bucket allow about an eighth of
-- its script time (paired, this file ÷ charge.lua 0.87; docs/authorizer.md,
-- "Where a decision's Redis time goes"). This file runs straight through:
-- TIME, GET, SET and the reply.
--
-- KEYS[1]  the bucket's key
-- ARGV     <cost> <limit> <period> <burst> "0"; cost >= 1, limit > 0
--
-- Errors: the one write is the last command, a SET of a value formatted
-- here: it cannot fail for a reason of ours.

local t = redis.call('TIME')
-- now: microseconds since 2024-01-01 UTC (bucket.lua).
local now = (t[1] - 1704067200) * 1000000 + t[2]
local MAX_MS = 3153600000000
local tonumber, ceil, format, match, HUGE = tonumber, math.ceil, string.format, string.match, math.huge
local cs, limit = ARGV[1], tonumber(ARGV[2])
local cost = 1
if cs ~= '1' then
	cost = tonumber(cs)
end
local T = ARGV[3] / limit
local burst = limit
if ARGV[4] ~= ARGV[2] then
	burst = tonumber(ARGV[4])
end

-- The bucket: full unless its key holds a tat still ahead of now, in one
-- of the two stored forms (bucket.lua, "Stored value"), converted to these
-- numbers when it was written with others (bucket.lua, "A change of
-- numbers"; px is then the PX of that conversion, written even on a deny).
local at, px = now, false
local v = redis.call('GET', KEYS[1])
if v then
	-- #include stored.lua
end
local h = (now - at) / T + burst

local allowed, wait = 1, 0
if h + 1e-6 < cost then
	-- Denied: its wait is until it holds cost; never when cost exceeds
	-- its burst.
	allowed, wait = 0, -1
	if cost <= burst then
		wait = ceil((at + (cost - burst) * T - now) / 1000)
		if wait < 1 then
			wait = 1
		elseif wait > MAX_MS then
			wait = MAX_MS
		end
	end
else
	at, h = at + cost * T, h - cost
	px = ceil((at - now) / 1000) + 1
	if px > MAX_MS then
		px = MAX_MS
	end
end

-- The write, as charge.lua's step 3 formats it.
if px then
	local f = '%.17g %.17g %s'
	if at % 1 == 0 and T % 1 == 0 and at < 1e16 and T < 1e16 then
		f = '%d %d %s'
	end
	redis.call('SET', KEYS[1], format(f, at, T, ARGV[4]), 'PX', format('%d', px))
end

local r = math.floor(h + 1e-6)
if r < 0 then
	r = 0
end
local reset = ceil((at - now) / 1000)
if reset < 0 then
	reset = 0
elseif reset > MAX_MS then
	reset = MAX_MS
end
return format('%d 1 %d %d %d 0', allowed, r, reset, wait)
