-- bucket.lua: check and charge 1..N buckets of one subject, atomically:
-- token buckets (rate rules) and calendar quotas (quota rules).
--
-- A token bucket holds up to <burst> tokens and refills <limit> tokens every
-- <period>, continuously. A quota holds <limit> tokens per calendar window
-- (a day, a week, a month or a year, see "Quotas" below) and is full again
-- when the window ends. Either every enforcing bucket has what the request
-- needs and every bucket that has <cost> tokens is charged, or nothing is
-- charged (a deny leaves every bucket as it was, but for one it converts to
-- new numbers, see "A change of numbers" below). The clock is Redis TIME
-- (microseconds); the caller never sends its own, and quota windows are
-- computed here from it.
--
-- KEYS[i]        bucket i's key, <prefix>{<subject hash>}:<bucket id>, a
--                quota's followed by ":q<unit><anchor>" (see "Quotas"). All
--                keys share the hash tag, so they live in one cluster slot.
-- KEYS[N+1]      a usage report's idempotency key, optional (see "Usage")
-- ARGV[1]        cost: tokens to take from every bucket, integer >= 0; 0
--                peeks: decide as for cost 1, write nothing, reply per
--                bucket. "u<cost>" (cost an integer, negative refunds) is a
--                usage report (see "Usage").
-- ARGV[4i-2..4i+1], for bucket i (N = (#ARGV-1)/4 buckets):
--                "l<cost>" is a charge of cost for a lease (see "Leases").
--   limit        tokens refilled per period (per window for a quota),
--                integer >= 0; 0 = blocked (never has a token, never written)
--   period       a token bucket's refill period in microseconds, integer >
--                0; a quota's window, one letter: d (day), w (week), m
--                (calendar month), y (calendar year). A first byte above '9'
--                is what makes the bucket a quota.
--   burst        a token bucket's capacity in tokens, integer > 0; a
--                quota's anchor, in microseconds since 2024-01-01 UTC, an
--                integer multiple of 1000 (whole milliseconds), 0 when the
--                rule has none: midnight UTC, and 2024-01-01 was a Monday,
--                the 1st and January. (A quota's capacity is its limit.)
--   flags        "0" enforcing or "1" shadow (1 = never denies: charged when
--                it has the tokens, a would-be deny is reported in the
--                shadow mask); with an admission floor (min_remaining)
--                "<shadow> <floor>", such as "0 100": the request needs
--                cost + floor tokens in this bucket, and the caller keeps
--                cost + floor <= burst (a quota: <= limit)
--
-- The caller keeps every bucket's refill horizon, burst*period/limit (the
-- time an empty bucket takes to fill up), at most 10 years (MaxHorizon in
-- limiter.go; rules validation enforces it on every rule and plan), and a
-- quota's anchor between 1970 and 2100. Then every time below, in
-- microseconds since 2024, stays far under 2^53 (about 285 years), where
-- doubles stop counting microseconds exactly; a usage debt (at most one
-- burst) at most doubles the horizon. A cost above a bucket's burst never
-- charges it, so no cost stretches that horizon.
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
-- Quotas. A quota's key holds what its current window used, a bare
-- integer, and expires when the window ends: an existing key is the
-- current window, a missing one a fresh window (used 0). The caller names
-- the key after the rule's unit and anchor (limiter.go: ":q", the letter,
-- the anchor in milliseconds since 2024), so a change of either starts a
-- fresh window under another key, and the old key expires with its
-- window. The window is computed only at its first call, from TIME and the
-- anchor with integer civil-date arithmetic (UTC): days and weeks repeat
-- every 24 h or 7 days from the anchor; months and years add calendar
-- months to the anchor's date, a day 31 clamped to the month's end (and
-- Feb 29 to Feb 28), its time of day kept. Windows start and end on whole
-- milliseconds (the anchor is whole milliseconds), and the key's expiry
-- (PXAT, Redis 6.2+) is 1 ms before the end: Redis counts whole
-- milliseconds and keeps a key through its expiry's millisecond, so the key
-- goes exactly when the window ends.
--
-- So a charge costs a quota one INCRBY, which keeps the expiry, and no read:
-- a quota is charged as it is read when every bucket before it admitted
-- (the buckets are read in order), and the charge is undone (DECRBY; a key
-- the charge made is deleted) when a later bucket denies, or for a shadow
-- quota without the tokens. (A charge that reads every token bucket first
-- would walk the buckets twice; charging first costs a deny by a later
-- bucket an INCRBY and its undo, and a deny is the rarer call, mostly
-- answered by the local deny cache anyway.) The result is exactly
-- what reading first would give, all within one script, so no one sees the
-- undone charge; only the replication stream and the AOF carry it. The
-- window's end (PEXPIRETIME, Redis 7.0+; PTTL before) is read when a call
-- needs it: a quota about to deny (for its retry), the limiting quota of
-- the reply (for its reset), a peek, a usage report, a lease, and a key
-- the INCRBY may have made. A key whose end TIME has reached (its last
-- millisecond, which Redis still serves) is a fresh window there; a charge
-- that reads no end counts in the window Redis still holds: the call
-- started before it ended.
--
-- A quota holds limit - used tokens; its reset (in the reply) is the time
-- until the window ends, even when nothing is used. A change of its limit
-- keeps used (an upgrade of a monthly quota keeps what the month used). A
-- denied quota's retry is the time until its window ends.
--
-- A value that is not a canonical non-negative integer (what INCRBY
-- refuses, and nothing this script writes) is a fresh window, overwritten
-- by the next charge. A key without an expiry (nothing this script writes
-- either) would never reset: every call that reads the window's end checks
-- it, and a key without one is a fresh window there. So it never denies
-- anybody, and is repaired by the first charge after it would have.
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
-- Usage ("u<cost>"): no admission decision. Every bucket with a limit,
-- shadows and enforcing alike, is charged cost tokens whatever it holds:
-- it may go into debt, at most one burst (a quota's used at most twice its
-- limit; a larger debt is clamped there), and later requests are denied,
-- with the right retry, until it has refilled (a quota: until its window
-- ends). A negative cost refunds, never above full (used never below 0).
-- With KEYS[N+1], an idempotency key: when it exists the report is a retry
-- and nothing is written; else the charge is written and the key set for
-- 24 h (PX 86400000), in the same call, so concurrent retries count once.
--
-- Leases ("l<cost>", lease.go): decided and charged exactly as cost, and
-- the reply is followed, per bucket, by " <window end> <until>": a quota's
-- window end (Unix ms, its key's expiry) and the whole milliseconds until
-- it (so that the lease never outlives the window), "0 0" for a token
-- bucket. lease_return.lua gives a quota's unused tokens back only to the
-- window that ends then: a lease charged before a window ended gives
-- nothing to the next one. A request's floor applies to the lease's whole
-- charge (it needs cost + floor), so a lease never dips below it. Only
-- lease calls of a request with a quota use this form: the hot path pays
-- one boolean test.
--
-- Every millisecond count, the PX of a write and the reset and retry of the
-- reply, is an integer clamped to MAX_MS (100 years), and the PX is written
-- with %d: never an exponent, which SET refuses ("value is not an integer
-- or out of range"). Within the horizon above the clamp never applies; it
-- keeps a bucket out of contract (or a stray value in a key) from turning
-- into an error.
--
-- Errors: every argument is the caller's (limiter.go), well-formed. The
-- first write is a quota's INCRBY, a pcall (a value it refuses is a fresh
-- window, above), or a token bucket's SET in step 3; after it the script
-- only reads (GET, PEXPIRETIME, PTTL), computes, and writes what cannot
-- fail for a reason of ours: a SET of a value it formatted, PEXPIREAT,
-- DECRBY of its own INCRBY, DEL. So it never fails after a write: a reply
-- is an answer for all buckets or an error that changed nothing.
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
--   reset        milliseconds until the limiting bucket is full again (a
--                quota: until its window ends), 0 to MAX_MS
--   retry        0 when allowed; else milliseconds until every bucket has
--                what the request needs (cost + floor), 1 to MAX_MS; -1 when
--                never (that exceeds a burst or a quota, or limit 0)
--   shadow mask  bit i-1 set when shadow bucket i would have denied
-- followed, for a peek (cost 0) only, by " <remaining> <reset>" per bucket.
-- A usage report replies "u <duplicate> " then " <remaining> <reset>" per
-- bucket: duplicate 1 when the idempotency key was there (nothing
-- charged), remaining whole tokens after the report, negative in debt.

-- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless
-- told to replicate effects; since Redis 7 this call is a no-op.
if redis.replicate_commands then
	redis.replicate_commands()
end

local tonumber, ceil, floor, match, byte, HUGE = tonumber, math.ceil, math.floor, string.match, string.byte, math.huge
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
-- tonumber is strtod, a few hundred instructions a call: the usual cost 1
-- and a burst equal to the limit (same string, so the same interned Lua
-- string) are recognised without it. cs is the cost as a string, what a
-- quota's INCRBY adds.
local usage, lease = false, false
local cs = ARGV[1]
local cost = cs
if cost == '1' then
	cost = 1
else
	local c1 = byte(cost)
	if c1 == 117 then -- 'u': a usage report
		usage = true
		cost = tonumber(string.sub(cost, 2))
	elseif c1 == 108 then -- 'l': a lease, the reply tells its windows
		lease = true
		cs = string.sub(cost, 2)
		cost = tonumber(cs)
	else
		cost = tonumber(cost)
	end
end
local need = cost
if need <= 0 then
	need = 1
end
-- Whether every quota's window end is read: the reply of a peek, a usage
-- report or a lease tells it. A charge reads it only to deny.
local ends = usage or lease or cost == 0

-- expiry(key): see step 1; made there for a request with a quota, so that
-- token buckets alone do not pay for its closure.
local expiry

-- EPS absorbs float rounding: a bucket holding cost tokens up to 1e-6 is
-- treated as holding them (the deficit is repaid by later refill, so it
-- never accumulates).
local EPS = 1e-6
-- MAX_MS bounds every millisecond count: 100 years of 365 days.
local MAX_MS = 3153600000000
local n = (#ARGV - 1) / 4
-- One table for all buckets (this script's cost is mostly allocations):
-- st[4i-3] = when bucket i is full again (us; a quota's window end, false
-- while not read), st[4i-2] = its tokens now, st[4i-1] = us per token (0
-- when blocked, -1 for a quota), st[4i] = the PX of its write (a string),
-- false when it is not written (a converted bucket has one from step 1, a
-- charged bucket gets one in step 2; a charged quota 1 or 2, see step 1).
-- Presized for two buckets, or four.
local st
if n > 2 then
	st = { 0, 0, 0, false, 0, 0, 0, false, 0, 0, 0, false, 0, 0, 0, false }
else
	st = { 0, 0, 0, false, 0, 0, 0, false }
end
-- A quota's used is limit - tokens, and whether a bucket is a shadow is the
-- first byte of its flags: no other table, so plain rate buckets cost
-- nothing more.
local window -- the calendar function below, made on first use
local fresh -- fresh[i]: quota i starts a window, ending then (PXAT, Unix ms)
local allowed, mask, lim, wait = 1, 0, 0, -2 -- wait: the denying bucket's, -1 = never

-- 1. Read every bucket and decide, in order. A charge that every bucket
-- before it admits charges a quota as it reads it (see "Quotas").
local spec = false -- whether step 1 charged a quota
for i = 1, n do
	local o = 4 * i - 2
	local p = ARGV[o + 1]
	local limit = tonumber(ARGV[o])
	local flags = ARGV[o + 3]
	local shadow, need_i = flags == '1', need
	if flags ~= '0' and not shadow then
		local sh, fl = match(flags, '^([01]) (%d+)$')
		shadow, need_i = sh == '1', need + tonumber(fl)
	end
	local at, h, T, burst, px = now, 0, 0, 0, false
	-- A quota's period is a letter (see ARGV).
	if limit > 0 and byte(p) > 57 then
		if not expiry then
			-- expiry(key): the end of the window a quota's key holds, in
			-- microseconds since 2024: 1 ms after its expiry (see
			-- "Quotas"), or false when it has none (or there is no key).
			-- PEXPIRETIME (Redis 7.0+) is the PXAT written, exactly;
			-- before 7.0, the PTTL from now, to the millisecond.
			expiry = function(key)
				local e = redis.pcall('PEXPIRETIME', key)
				if type(e) ~= 'number' then
					e = redis.call('PTTL', key)
					if e >= 0 then
						return now + (e + 1) * 1000
					end
				end
				if e < 0 then
					return false
				end
				return (e + 1 - 1704067200000) * 1000
			end
		end
		-- A quota: the key holds the window's used; an existing key is
		-- the current window.
		local used, stop, made = false, false, false
		if cost > 0 and not usage and allowed == 1 then
			-- Every bucket so far admits: charge now (INCRBY keeps the
			-- expiry); the undo after step 1 reverts it on a deny, or for
			-- a shadow without the tokens. INCRBY refuses (and leaves) a value
			-- that is not an integer: a fresh window.
			local r = redis.pcall('INCRBY', KEYS[i], cs)
			if type(r) == 'number' then
				px = 1
				-- As the GET below reads: 0 <= used < 10^15.
				if r >= cost and r < 1e15 then
					-- Used 0: maybe no window yet (INCRBY made the key).
					used, made = r - cost, r == cost
				end
			end
		else
			local v = redis.call('GET', KEYS[i])
			-- What INCRBY reads: "0", or digits without a leading zero
			-- (at most 15, so that the double is exact).
			if v and #v < 16 and (v == '0' or match(v, '^[1-9]%d*$')) then
				used = tonumber(v)
			end
		end
		if used and (made or ends or limit - used + EPS < need_i) then
			-- The window's end: for a deny's wait or the reply, and to
			-- tell a key INCRBY made. A key without an expiry is no
			-- window.
			stop = expiry(KEYS[i])
			if not stop or stop <= now then
				-- No window, or the one that TIME says has just ended.
				used = false
			end
		end
		if not used and not window then
			-- calendar: begin
			-- window(unit, anchor, now): the calendar window [start, stop)
			-- that holds now, in microseconds since 2024-01-01 UTC, of the
			-- windows repeating from anchor: every day (d) or week (w), or
			-- every calendar month (m) or year (y), a day 31 clamped to the
			-- month's end (Feb 29 to Feb 28), the anchor's time of day kept.
			-- Integer civil-date arithmetic (days from 1970-01-01, H.
			-- Hinnant's days_from_civil), every value an integer far below
			-- 2^53, so every double is exact.
			local D = 86400000000
			local function days(y, m, d)
				if m <= 2 then
					y = y - 1
				end
				local era = floor(y / 400)
				local yoe = y - era * 400
				local mp = m + 9
				if m > 2 then
					mp = m - 3
				end
				local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + floor((153 * mp + 2) / 5) + d - 1
				return era * 146097 + doe - 719468
			end
			local function civil(z)
				z = z + 719468
				local era = floor(z / 146097)
				local doe = z - era * 146097
				local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
				local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
				local mp = floor((5 * doy + 2) / 153)
				local m = mp + 3
				if mp >= 10 then
					m = mp - 9
				end
				local y = yoe + era * 400
				if m <= 2 then
					y = y + 1
				end
				return y, m, doy - floor((153 * mp + 2) / 5) + 1
			end
			window = function(u, a, t)
				if u == 'd' or u == 'w' then
					local len = D
					if u == 'w' then
						len = 7 * D
					end
					local s = a + floor((t - a) / len) * len
					-- The quotient is a double: correct a rounding at a boundary.
					if s > t then
						s = s - len
					elseif s + len <= t then
						s = s + len
					end
					return s, s + len
				end
				local ad = floor(a / D)
				local tod = a - ad * D
				local ay, am, aday = civil(ad + 19723) -- 2024-01-01 is day 19723
				local ny, nm = civil(floor(t / D) + 19723)
				local step = 1
				if u == 'y' then
					step = 12
				end
				-- start(k): k months from the anchor, the day clamped.
				local function start(k)
					local mi = am - 1 + k
					local y = ay + floor(mi / 12)
					local m = mi - floor(mi / 12) * 12 + 1
					local d = aday
					if d > 28 then
						local dim = days(y + floor(m / 12), m % 12 + 1, 1) - days(y, m, 1)
						if d > dim then
							d = dim
						end
					end
					return (days(y, m, d) - 19723) * D + tod
				end
				local k = floor(((ny - ay) * 12 + nm - am) / step) * step
				local s = start(k)
				if s > t then
					k = k - step
					s = start(k)
				end
				return s, start(k + step)
			end
			-- calendar: end
		end
		if not used then
			-- A fresh window; its first charge writes cost, expiring
			-- at its end.
			local _
			_, stop = window(p, tonumber(ARGV[o + 2]), now)
			used = 0
			local e = string.format('%d', stop / 1000 + 1704067199999)
			if made then
				-- INCRBY made it (or found "0" without an expiry): it
				-- holds cost, and now expires with its window. Undone
				-- by deleting the key.
				redis.call('PEXPIREAT', KEYS[i], e)
				px = 2
			elseif cost > 0 and not usage and allowed == 1 then
				-- Charged here, as above (a value INCRBY refused or
				-- one out of range, or one without an expiry); undone by
				-- deleting the key.
				redis.call('SET', KEYS[i], cs, 'PXAT', e)
				px = 2
			else
				fresh = fresh or {}
				fresh[i] = e
			end
		end
		spec = spec or px
		at, h, T = stop, limit - used, -1
	elseif limit > 0 then
		T = tonumber(p) / limit
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
	if h + EPS < need_i then
		if shadow then
			mask = mask + 2 ^ (i - 1)
		else
			allowed = 0
			-- The wait only matters on a deny: not computed otherwise.
			local w = -1
			if T < 0 and need_i <= limit then
				-- A quota: until its window resets.
				w = ceil((at - now) / 1000)
			elseif T > 0 and need_i <= burst then
				w = ceil((at + (need_i - burst) * T - now) / 1000)
			end
			if w ~= -1 then
				if w < 1 then
					w = 1
				elseif w > MAX_MS then
					w = MAX_MS
				end
			end
			-- The longest wait (-1, never, the longest of all), the
			-- first bucket of it.
			local a, b = w, wait
			if a == -1 then
				a = HUGE
			end
			if b == -1 then
				b = HUGE
			end
			if a > b then
				lim, wait = i, w
			end
		end
	end
end

-- Undo what step 1 charged and the request does not: every quota on a deny,
-- a shadow quota without the tokens (a shadow is charged only when it has
-- them, and one without them is in the mask). A window step 1 started
-- loses its key (nothing of it was there, or nothing valid); any other
-- gets DECRBY of the INCRBY: both leave the key as it was (the expiry
-- too), and neither can fail.
if spec and (allowed == 0 or mask > 0) then
	for i = 1, n do
		local c = st[4 * i]
		if st[4 * i - 1] < 0 and c and (allowed == 0 or st[4 * i - 2] + EPS < cost) then
			if c == 2 then
				redis.call('DEL', KEYS[i])
			else
				redis.call('DECRBY', KEYS[i], cs)
			end
			st[4 * i] = false
		end
	end
end

if usage then
	-- A usage report: charge (cost > 0, into debt) or refund (cost < 0,
	-- never above full) every bucket, shadows included, whatever it holds.
	-- Debt is at most one burst (a quota's limit): a rate bucket is full
	-- again within twice its refill horizon, 20 years, so every time stays
	-- exact. An idempotency key (KEYS[n+1]) already there means a retry:
	-- nothing is written. Every value is computed before the first write.
	local dup = 0
	local idem = KEYS[n + 1]
	if idem and redis.call('EXISTS', idem) == 1 then
		dup = 1
	end
	local out, sets = 'u ' .. dup, {}
	for i = 1, n do
		local at, h, T = st[4 * i - 3], st[4 * i - 2], st[4 * i - 1]
		if dup == 0 and cost ~= 0 and T < 0 then
			local limit = tonumber(ARGV[4 * i - 2])
			local used = limit - h + cost
			if used < 0 then
				used = 0
			elseif used > 2 * limit then
				used = 2 * limit
			end
			h = limit - used
			-- A window that has a key keeps its expiry.
			if fresh and fresh[i] then
				sets[#sets + 1] = { KEYS[i], string.format('%d', used), 'PXAT', fresh[i] }
			else
				sets[#sets + 1] = { KEYS[i], string.format('%d', used), 'KEEPTTL' }
			end
		elseif dup == 0 and cost ~= 0 and T > 0 then
			local burst = tonumber(ARGV[4 * i])
			at = at + cost * T
			if at < now then
				at = now
			elseif at > now + 2 * burst * T then
				at = now + 2 * burst * T
			end
			h = (now - at) / T + burst
			local px = ceil((at - now) / 1000) + 1
			if px > MAX_MS then
				px = MAX_MS
			end
			sets[#sets + 1] = { KEYS[i], string.format('%.17g %.17g %s', at, T, ARGV[4 * i]), 'PX', string.format('%d', px) }
		elseif dup == 0 and st[4 * i] then
			-- Only converted to new numbers (cost 0).
			sets[#sets + 1] = { KEYS[i], string.format('%.17g %.17g %s', at, T, ARGV[4 * i]), 'PX', st[4 * i] }
		end
		local reset = 0
		if T ~= 0 then
			reset = ceil((at - now) / 1000)
			if reset < 0 then
				reset = 0
			elseif reset > MAX_MS then
				reset = MAX_MS
			end
		end
		out = out .. string.format(' %d %d', floor(h + EPS), reset)
	end
	for _, s in ipairs(sets) do
		redis.call('SET', unpack(s))
	end
	if idem and dup == 0 then
		redis.call('SET', idem, '1', 'PX', 86400000)
	end
	return out
end

if allowed == 1 then
	wait = 0
	-- 2. Compute every charge, and find the limiting bucket: fewest tokens
	-- left, enforcing buckets first. Nothing more is written yet (quotas
	-- were, in step 1).
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
		elseif T < 0 and st[4 * i] then
			-- A quota charged in step 1.
			h = h - cost
			st[4 * i - 2] = h
		end
		local f = ARGV[4 * i + 1]
		if (f == '0' or f ~= '1' and byte(f) == 48) and (lim == 0 or h < st[4 * lim - 2]) then
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

-- 3. Write: every charged token bucket, and every one converted to new
-- numbers (also on a deny); a peek writes nothing. Only SETs of what was
-- computed from here on: nothing after the first can fail for a reason of
-- ours.
if cost > 0 then
	for i = 1, n do
		if st[4 * i] and st[4 * i - 1] >= 0 then
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
	local reset, at = 0, st[4 * b - 3]
	if not at then
		-- A quota whose end a charge did not read: its key's expiry (one
		-- without is the stray key of "Quotas": reset 0).
		at = expiry(KEYS[b]) or now
	end
	if st[4 * b - 1] ~= 0 then
		reset = ceil((at - now) / 1000)
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
if lease then
	-- A lease call: per bucket the window it charged (see "Leases").
	for i = 1, n do
		if st[4 * i - 1] < 0 then
			local at = st[4 * i - 3]
			out = out .. string.format(' %d %d', floor(at / 1000) + 1704067200000, floor((at - now) / 1000))
		else
			out = out .. ' 0 0'
		end
	end
end
return out
