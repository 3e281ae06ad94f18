-- bucket.lua: check and charge 1..N token buckets of one subject, atomically.
--
-- A bucket holds up to <burst> tokens and refills <limit> tokens every
-- <period>, continuously. Either every enforcing bucket has <cost> tokens and
-- every bucket that has them is charged, or nothing is charged (a deny
-- writes only a bucket it converts to new numbers, see "A change of
-- numbers" below). The clock is Redis TIME (microseconds); the caller never sends its own.
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
-- The caller keeps every bucket's refill horizon, burst*period/limit (the
-- time an empty bucket takes to fill up), at most 10 years (MaxHorizon in
-- limiter.go; rules validation enforces it on every rule and plan). Then
-- every time below, in microseconds since 2024, stays far under 2^53 (about
-- 285 years), where doubles stop counting microseconds exactly. A cost above
-- a bucket's burst never charges it, so no cost stretches that horizon.
--
-- Stored value (GCRA form of the bucket): the string "<tat> <T> <burst>".
-- <tat> is the time at which the bucket will be full again, in microseconds
-- since 2024-01-01 UTC, a float (a fraction of a token is a fraction of
-- T); <T> = period/limit is the microseconds per token it was computed
-- with, a float; <burst> the capacity it was computed with. Both floats are
-- written with %.17g, which reads back as the same double. A bucket then
-- holds (now + burst*T - tat) / T tokens. The key expires (PX) 1 ms after
-- the bucket is full (so it never expires early, whatever clock the server
-- takes the expiry from). A missing key, a <tat> not above now, or a value
-- that is neither "<number>" nor "<number> <T> <burst>" with T and burst
-- positive and finite, is a full bucket.
--
-- A change of numbers keeps what was used, not the time until full: when
-- the stored <T> or <burst> differs from the bucket's, the bucket had used
-- u = (tat - now) / T_stored tokens; u is clamped to the new burst (a
-- downgrade leaves 0 tokens, never a debt) and tat becomes now + u*T. So an
-- upgrade leaves new burst - used, a downgrade 0 refilling at the new rate
-- from now. That converted value is written by the call that converts it,
-- allowed or denied (a deny writes nothing else), so it happens once per
-- change, at the bucket's first charge or deny after it; until then the
-- bucket refills at its old rate. A peek writes nothing and reports the
-- converted bucket. A value of the previous version, "<tat>" alone, is read
-- with the bucket's current T and burst (as that version read it): nothing
-- is converted, and the next write stores the new form. (The previous
-- version reads the new form as "not a number": a full bucket. While both
-- run, a deploy, its calls can find a fresh burst.)
--
-- Every millisecond count, the PX of a write and the reset and retry of the
-- reply, is an integer clamped to MAX_MS (100 years), and the PX is written
-- with %d: never an exponent, which SET refuses ("value is not an integer
-- or out of range"). Within the horizon above the clamp never applies; it
-- keeps a bucket out of contract (or a stray value in a key) from turning
-- into an error.
--
-- Errors: the script reads and computes everything before its first write,
-- then only writes (a charge, or a conversion above; a peek never writes), so it never fails after a write: a reply is an answer
-- for all buckets or an error that changed nothing.
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
--   reset        milliseconds until the limiting bucket is full again, 0 to
--                MAX_MS
--   retry        0 when allowed; else milliseconds until <cost> tokens are
--                available in every bucket, 1 to MAX_MS; -1 when never
--                (cost > burst or limit 0)
--   shadow mask  bit i-1 set when shadow bucket i would have denied
-- followed, for a peek (cost 0) only, by " <remaining> <reset>" per bucket.

-- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless
-- told to replicate effects; since Redis 7 this call is a no-op.
if redis.replicate_commands then
	redis.replicate_commands()
end

local tonumber, ceil, floor, match, HUGE = tonumber, math.ceil, math.floor, string.match, math.huge
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
-- MAX_MS bounds every millisecond count: 100 years of 365 days.
local MAX_MS = 3153600000000
local n = #KEYS
-- One table for all buckets (this script's cost is mostly allocations):
-- st[4i-3] = when bucket i is full again (us), st[4i-2] = its tokens now,
-- st[4i-1] = us per token (0 when blocked), st[4i] = the PX of its write
-- (a string), false when it is not written (a converted bucket has one
-- from step 1, a charged bucket gets one in step 2). Presized for two buckets.
local st = { 0, 0, 0, false, 0, 0, 0, false }
local allowed, mask, lim, wait = 1, 0, 0, -2 -- wait: the denying bucket's, -1 = never

-- 1. Read every bucket and decide.
for i = 1, n do
	local o = 4 * i - 2
	local limit = tonumber(ARGV[o])
	local at, h, T, burst, px = now, 0, 0, 0, false
	if limit > 0 then
		T = tonumber(ARGV[o + 1]) / limit
		burst = limit
		if ARGV[o + 2] ~= ARGV[o] then
			burst = tonumber(ARGV[o + 2])
		end
		-- No key, or a value that is not one of the two forms: full.
		local v = redis.call('GET', KEYS[i])
		if v then
			local tat, Ts, bs = tonumber(v), T, burst
			if not tat then
				local a, b, c = match(v, '^(%S+) (%S+) (%S+)$')
				if a then
					tat, Ts, bs = tonumber(a), tonumber(b), tonumber(c)
				end
				-- Not a number (nil), NaN, 0, negative or inf: full.
				if not (Ts and bs and Ts > 0 and Ts < HUGE and bs > 0 and bs < HUGE) then
					tat = nil
				end
			end
			-- Else full (tat nil or NaN, or in the past): TIME may even
			-- have gone back (failover).
			if tat and tat > at then
				at = tat
				if Ts ~= T or bs ~= burst then
					-- New numbers: keep what was used (at most the new
					-- burst), and write it back even on a deny.
					local used = (at - now) / Ts
					if used > burst then
						used = burst
					end
					at = now + used * T
					px = ceil((at - now) / 1000) + 1
					if px > MAX_MS then
						px = MAX_MS
					end
					px = string.format('%d', px)
				end
			end
		end
		h = (now - at) / T + burst
	end
	st[4 * i - 3], st[4 * i - 2], st[4 * i - 1], st[4 * i] = at, h, T, px
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
				elseif w > MAX_MS then
					w = MAX_MS
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
	-- 2. Compute every charge, and find the limiting bucket: fewest tokens
	-- left, enforcing buckets first. Nothing is written yet.
	for i = 1, n do
		local T, h = st[4 * i - 1], st[4 * i - 2]
		if cost > 0 and T > 0 and h + EPS >= cost then
			local at = st[4 * i - 3] + cost * T
			h = h - cost
			local ttl = ceil((at - now) / 1000) + 1
			if ttl > MAX_MS then
				ttl = MAX_MS
			end
			st[4 * i - 3], st[4 * i - 2], st[4 * i] = at, h, string.format('%d', ttl)
		end
		if ARGV[4 * i + 1] == '0' and (lim == 0 or h < st[4 * lim - 2]) then
			lim = i
		end
	end
	if lim == 0 then
		for i = 1, n do
			if lim == 0 or st[4 * i - 2] < st[4 * lim - 2] then
				lim = i
			end
		end
	end
end

-- 3. Write: every charged bucket, and every bucket converted to new numbers
-- (also on a deny); a peek writes nothing. Only SETs from here on: nothing
-- after the first can fail for a reason of ours.
if cost > 0 then
	for i = 1, n do
		if st[4 * i] then
			redis.call('SET', KEYS[i], string.format('%.17g %.17g %s', st[4 * i - 3], st[4 * i - 1], ARGV[4 * i]), 'PX', st[4 * i])
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
	local r = floor(st[4 * b - 2] + EPS)
	if r < 0 then
		r = 0
	end
	local reset = 0
	if st[4 * b - 1] > 0 then
		reset = ceil((st[4 * b - 3] - now) / 1000)
		if reset < 0 then
			reset = 0
		elseif reset > MAX_MS then
			reset = MAX_MS
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
