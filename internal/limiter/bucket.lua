-- bucket.lua: what every operation on a subject's buckets shares: the
-- arguments that describe a bucket, the clock, the token bucket's stored
-- form and arithmetic, and a quota's calendar window. It is not a script
-- by itself: script.go puts it in front of each operation's own file, and
-- each result is a script of its own (its own SHA), so that a call carries
-- the code of its operation and nothing else:
--
--   charge.lua  check and charge, all or nothing (Allow)
--   peek.lua    decide as a charge of 1 would, write nothing (Peek, Allow
--               with cost 0)
--   usage.lua   charge or refund with no decision, into debt (Charge)
--   lease.lua   a charge for a token lease that names its quotas' windows
--               (charge.lua's body, then lease.lua)
--
-- (lease_return.lua, which gives a lease's unused tokens back, stands
-- alone: it reads the stored forms below strictly, and converts nothing.
-- charge_one.lua, the charge of one enforcing token bucket, stands alone
-- too, straight through; it and step 1 below read a stored value by one
-- text, stored.lua, which script.go puts in both.)
--
-- A token bucket holds up to <burst> tokens and refills <limit> tokens
-- every <period>, continuously. A quota holds <limit> tokens per calendar
-- window (a day, a week, a month or a year, see "Quotas" below) and is full
-- again when the window ends. The clock is Redis TIME (microseconds); the
-- caller never sends its own, and quota windows are computed here from it.
--
-- KEYS[i]        bucket i's key, <prefix>{<subject hash>}:<bucket id>, a
--                quota's followed by ":q<unit><anchor>" (see "Quotas"). The
--                keys of one subject share the hash tag, so they live in
--                one cluster slot.
-- ARGV[1]        the operation's amount of tokens (see its file)
-- ARGV[4i-2..4i+1], for bucket i (N = (#ARGV-1)/4 buckets):
--   limit        tokens refilled per period (per window for a quota),
--                integer >= 0 in canonical decimal; "0" = blocked (never
--                has a token, never written)
--   period       a token bucket's refill period in microseconds, integer >
--                0; a quota's window, one letter: d (day), w (week), m
--                (calendar month), y (calendar year). A first byte above '9'
--                is what makes the bucket a quota; "c" makes it a
--                concurrency bucket (see "In flight").
--   burst        a token bucket's capacity in tokens, integer > 0; a
--                quota's anchor, in microseconds since 2024-01-01 UTC, an
--                integer multiple of 1000 (whole milliseconds), 0 when the
--                rule has none: midnight UTC, and 2024-01-01 was a Monday,
--                the 1st and January. (A quota's capacity is its limit.)
--                A concurrency bucket's slot TTL in microseconds.
--   flags        "0" enforcing or "1" shadow (1 = never denies: charged when
--                it has the tokens, a would-be deny is reported in the
--                shadow mask); with an admission floor (min_remaining)
--                "<shadow> <floor>", such as "0 100": the request needs
--                cost + floor tokens in this bucket, and the caller keeps
--                cost + floor <= burst (a quota: <= limit). A
--                concurrency bucket's is "<shadow> <slot id>" (a peek's
--                has no id).
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
-- A change of numbers keeps what was used, not the time until full: when
-- the stored <T> or <burst> differs from the bucket's, the bucket had used
-- u = (tat - now) / T_stored tokens; u is clamped to the new burst (a
-- downgrade leaves 0 tokens, never a debt) and tat becomes now + u*T. So an
-- upgrade leaves new burst - used, a downgrade 0 refilling at the new rate
-- from now. That converted value is written by the call that converts it,
-- a charge allowed or denied (a deny writes nothing else) or a usage
-- report, so it happens once per change, at the bucket's first charge or
-- deny after it; until then the bucket refills at its old rate. A peek
-- writes nothing and reports the converted bucket. A value of the previous
-- version, "<tat>" alone, is read with the bucket's current T and burst (as
-- that version read it): nothing is converted, and the next write stores
-- the new form. (The previous version reads the new form as "not a
-- number": a full bucket. While both run, a deploy, its calls can find a
-- fresh burst.)
--
-- Quotas. A quota's key holds what its current window used, a bare
-- integer, and expires when the window ends: an existing key is the
-- current window, a missing one a fresh window (used 0). The caller names
-- the key after the rule's unit and anchor (script.go: ":q", the letter,
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
-- goes exactly when the window ends. The window's end (PEXPIRETIME, Redis
-- 7.0+; PTTL before) is read when a call needs it (each operation says
-- when). A key whose end TIME has reached (its last millisecond, which
-- Redis still serves) is a fresh window there; a call that reads no end
-- counts in the window Redis still holds: the call started before it
-- ended.
--
-- A quota holds limit - used tokens; its reset (in a reply) is the time
-- until the window ends, even when nothing is used. A change of its limit
-- keeps used (an upgrade of a monthly quota keeps what the month used). A
-- denied quota's retry is the time until its window ends.
--
-- A value that is not a canonical non-negative integer (what INCRBY
-- refuses, and nothing these scripts write) is a fresh window, overwritten
-- by the next charge. A key without an expiry (nothing these scripts write
-- either) would never reset: every call that reads the window's end checks
-- it, and a key without one is a fresh window there. So it never denies
-- anybody, and is repaired by the first charge after it would have.
--
-- In flight. A concurrency bucket holds at most <limit> slots at once. Its
-- key is a sorted set of slot ids, each scored by when it expires (us since
-- 2024, now + TTL), and the key expires with its last slot. A slot is live
-- while its score is above now; a release (ZREM, limiter's Release) or its
-- expiry frees it, so a holder that never releases (a crash, an API
-- Gateway authorizer) holds it for the TTL and no longer. A request needs
-- one free slot whatever its cost. The slot id is the caller's, one per
-- request: a call re-sent after a lost reply finds its own slot, counts
-- it as free and re-adds it (the same member), so it holds one slot, not
-- two. Step 1 only reads (ZCOUNT, ZSCORE); charge.lua's step 3 drops
-- expired slots and adds the request's (ZREMRANGEBYSCORE, ZADD: neither
-- fails on a sorted set). A denied request's retry is 1 s: a slot frees
-- when any holder finishes, which no clock says, so the wait is a hint and
-- is never cached. Its reset is 0.
--
-- Every millisecond count, the PX of a write and the reset and retry of a
-- reply, is an integer clamped to MAX_MS (100 years), and the PX is written
-- with %d: never an exponent, which SET refuses ("value is not an integer
-- or out of range"). Within the horizon above the clamp never applies; it
-- keeps a bucket out of contract (or a stray value in a key) from turning
-- into an error.
--
-- Errors: every argument is the caller's (script.go), well-formed. Every
-- operation reads, decides and computes before it writes what cannot fail
-- for a reason of ours (each says how), so a reply is an answer for all
-- buckets or an error that changed nothing.
--
-- Step 1, which bucket.lua runs for every operation: read every bucket and
-- decide, in order, as a request of the operation's amount (a peek: of 1).
-- Two locals, set by the first line of each script (script.go), tell how:
--   charging     true for a charge (and a lease): a quota before the first
--                bucket that denies is charged as it is read (charge.lua
--                undoes that on a deny); false for a peek and a usage
--                report, which read it with GET
--   every_end    true for a lease, a peek and a usage report: every
--                quota's window end is read; false for a charge, which
--                reads one only when it needs it: for a deny's wait, and to
--                tell a key its INCRBY made (the reply reads the limiting
--                quota's)
-- A Redis script pays most for the closures it creates (with every local
-- they capture), its function calls and strtod (tonumber): step 1 makes
-- none for token buckets; a request with a quota makes expiry(), which
-- captures now, and window() only at a call's first fresh window, as the
-- script did before the split.

-- Redis < 5 replicates scripts verbatim and refuses writes after TIME unless
-- told to replicate effects; since Redis 7 this call is a no-op.
if redis.replicate_commands then
	redis.replicate_commands()
end

local tonumber, ceil, floor, match, byte, format, HUGE =
	tonumber, math.ceil, math.floor, string.match, string.byte, string.format, math.huge
local t = redis.call('TIME')
-- now: microseconds since 2024-01-01 UTC.
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
-- EPS absorbs float rounding: a bucket holding cost tokens up to 1e-6 is
-- treated as holding them (the deficit is repaid by later refill, so it
-- never accumulates).
local EPS = 1e-6
-- MAX_MS bounds every millisecond count: 100 years of 365 days.
local MAX_MS = 3153600000000
local n = (#ARGV - 1) / 4
-- cs and cost: the operation's amount, ARGV[1], as a string and a number
-- (the usual 1 without a tonumber). A bucket is decided on whether it
-- holds what the request needs of it: cost, at least 1 (a peek, cost 0,
-- decides as a charge of 1 would), plus its floor.
local cs = ARGV[1]
local cost = 1
if cs ~= '1' then
	cost = tonumber(cs)
end
local need = cost
if need < 1 then
	need = 1
end

-- st: one table for all buckets (a script's cost is mostly allocations).
-- st[4i-3] = when bucket i is full again (us since 2024; a quota's window
-- end, false while not read), st[4i-2] = its tokens now (free slots), st[4i-1] = us per
-- token (0 when blocked, -1 for a quota, -2 for a concurrency bucket), st[4i] = the PX of its write (a
-- string; "c" for a slot to add), false when it is not written: a token bucket converted to new
-- numbers has one from step 1, a charged one gets one from charge.lua; a
-- quota step 1 charged holds 1, or 2 when the charge made or replaced its
-- key. Presized for two buckets, or four.
local st
if n > 2 then
	st = { 0, 0, 0, false, 0, 0, 0, false, 0, 0, 0, false, 0, 0, 0, false }
else
	st = { 0, 0, 0, false, 0, 0, 0, false }
end
-- The decision so far: allowed, 1 or 0; mask, bit i-1 set when shadow
-- bucket i lacks what it needs; lim, the enforcing bucket that denies with
-- the longest wait (the first of them), and wait, that wait in ms (-1 =
-- never, the longest of all; -2 before any deny); first, the first
-- enforcing bucket that denies (n + 1: none), before which a charge
-- charges quotas as it reads them; quotas, whether a bucket is a quota;
-- spec, whether step 1 charged one; fresh[i], for a peek or a usage report,
-- the PXAT (Unix ms) that would end quota i's key when its window starts
-- with this call (nothing wrote it).
local allowed, mask, lim, wait, first = 1, 0, 0, -2, n + 1
local quotas, spec, fresh = false, false, nil

-- 1. Read every token bucket and decide it, in order. A quota's period is
-- a letter (ARGV above): it is read after them (below), with at = false
-- and T = -1 until then. (A limit of 0 is the string "0"; a quota's limit
-- is parsed where it is used.)
for i = 1, n do
	local o = 4 * i - 2
	local p = ARGV[o + 1]
	local at, h, T, px = now, 0, 0, false
	if p == 'c' then
		-- A concurrency bucket (see "In flight"): its free slots, one of
		-- them the request's own when a re-sent call finds it.
		T = -2
		local key, flags = KEYS[i], ARGV[o + 3]
		local held = redis.call('ZCOUNT', key, format('(%d', now), '+inf')
		if #flags > 2 then
			local mine = redis.call('ZSCORE', key, string.sub(flags, 3))
			if mine and tonumber(mine) > now then
				held = held - 1
			end
		end
		h = tonumber(ARGV[o]) - held
		if h < 1 then
			if byte(flags) == 49 then
				mask = mask + 2 ^ (i - 1)
			else
				if allowed == 1 then
					first = i
				end
				allowed = 0
				if wait ~= -1 and 1000 > wait then
					lim, wait = i, 1000
				end
			end
		end
	elseif ARGV[o] ~= '0' and byte(p) > 57 then
		at, T, quotas = false, -1, true
	else
		local burst = 0
		if ARGV[o] ~= '0' then
			local limit = tonumber(ARGV[o])
			T = tonumber(p) / limit
			-- A burst equal to the limit (the same string, so the same
			-- interned Lua string) is recognised without a tonumber.
			burst = limit
			if ARGV[o + 2] ~= ARGV[o] then
				burst = tonumber(ARGV[o + 2])
			end
			-- No key, or a value that is not one of the two forms: full.
			local v = redis.call('GET', KEYS[i])
			if v then
				-- #include stored.lua
				if px then
					px = format('%d', px)
				end
			end
			h = (now - at) / T + burst
		end
		local flags = ARGV[o + 3]
		local shadow, need_i = flags == '1', need
		if flags ~= '0' and not shadow then
			local sh, fl = match(flags, '^([01]) (%d+)$')
			shadow, need_i = sh == '1', need + tonumber(fl)
		end
		if h + EPS < need_i then
			if shadow then
				mask = mask + 2 ^ (i - 1)
			else
				if allowed == 1 then
					first = i
				end
				allowed = 0
				-- Its wait: until it holds need_i; never beyond its burst,
				-- or blocked (limit 0).
				local w = -1
				if T > 0 and need_i <= burst then
					w = ceil((at + (need_i - burst) * T - now) / 1000)
					if w < 1 then
						w = 1
					elseif w > MAX_MS then
						w = MAX_MS
					end
				end
				-- The longest wait (-1, never, the longest of all), the
				-- first bucket of it.
				if wait ~= -1 and (w == -1 or w > wait) then
					lim, wait = i, w
				end
			end
		end
	end
	st[4 * i - 3], st[4 * i - 2], st[4 * i - 1], st[4 * i] = at, h, T, px
end

-- Then every quota, in order (the token buckets are decided: first is the
-- first of them that denies). A quota's key holds its window's used; an
-- existing key is the current window.
local expiry, window
if quotas then
	-- expiry(key): the end of the window quota key holds, in us since 2024:
	-- 1 ms after its expiry (see "Quotas"), or false when it has none (or
	-- there is no key). PEXPIRETIME (Redis 7.0+) is the PXAT written,
	-- exactly; before 7.0, the PTTL from now, to the millisecond.
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

	for i = 1, n do
		if st[4 * i - 1] == -1 then
			local limit = tonumber(ARGV[4 * i - 2])
			local flags = ARGV[4 * i + 1]
			local shadow, need_i = flags == '1', need
			if flags ~= '0' and not shadow then
				local sh, fl = match(flags, '^([01]) (%d+)$')
				shadow, need_i = sh == '1', need + tonumber(fl)
			end
			local now_charging = charging and i < first
			local used, made, at, px = false, false, false, false
			if now_charging then
				-- Every bucket so far admits: charge now (INCRBY keeps the
				-- expiry); charge.lua undoes it on a deny, or for a shadow
				-- without the tokens. INCRBY refuses (and leaves) a value
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
			if used and (made or every_end or limit - used + EPS < need_i) then
				-- The window's end. A key without an expiry is no window.
				at = expiry(KEYS[i])
				if not at or at <= now then
					-- No window, or the one that TIME says has just ended.
					used = false
				end
			end
			if not used then
				-- A fresh window: its first charge writes cost, expiring at
				-- its end.
				if not window then
					-- window(unit, anchor, now): the calendar window
					-- [start, stop) that holds now, in us since 2024, of
					-- the windows repeating from anchor: every day (d) or
					-- week (w), or every calendar month (m) or year (y), a
					-- day 31 clamped to the month's end (Feb 29 to Feb
					-- 28), the anchor's time of day kept. Integer
					-- civil-date arithmetic (days from 1970-01-01, H.
					-- Hinnant's days_from_civil), every value an integer
					-- far below 2^53, so every double is exact. Made at a
					-- call's first fresh window (counting in a window that
					-- has its key needs no calendar), so that no other call
					-- pays for the closure; its helpers are made by each
					-- call of it, once per fresh window.
					window = function(u, a, t)
						local floor, D = math.floor, 86400000000
						if u == 'd' or u == 'w' then
							local len = D
							if u == 'w' then
								len = 7 * D
							end
							local s = a + floor((t - a) / len) * len
							-- The quotient is a double: correct a rounding
							-- at a boundary.
							if s > t then
								s = s - len
							elseif s + len <= t then
								s = s + len
							end
							return s, s + len
						end
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
				end
				local _
				_, at = window(ARGV[4 * i - 1], tonumber(ARGV[4 * i]), now)
				if at - now < 1000 then
					-- The window's last millisecond: a key written now
					-- would expire as it is written (its PXAT, the end
					-- less 1 ms, has come), and the charge would be
					-- lost. A window without a key counts its last
					-- millisecond in the next window.
					_, at = window(ARGV[4 * i - 1], tonumber(ARGV[4 * i]), at)
				end
				used = 0
				local e = format('%d', at / 1000 + 1704067199999)
				if made then
					-- INCRBY made it (or found "0" without an expiry): it
					-- holds cost, and now expires with its window. Undone
					-- by deleting the key.
					redis.call('PEXPIREAT', KEYS[i], e)
					px = 2
				elseif now_charging then
					-- Charged here, as above (a value INCRBY refused or one
					-- out of range, or one without an expiry); undone by
					-- deleting the key.
					redis.call('SET', KEYS[i], cs, 'PXAT', e)
					px = 2
				elseif not charging then
					fresh = fresh or {}
					fresh[i] = e
				end
			end
			spec = spec or px
			local h = limit - used
			st[4 * i - 3], st[4 * i - 2], st[4 * i] = at, h, px
			if h + EPS < need_i then
				if shadow then
					mask = mask + 2 ^ (i - 1)
				else
					allowed = 0
					if i < first then
						first = i
					end
					-- Its wait: until its window resets; never beyond its
					-- limit.
					local w = -1
					if need_i <= limit then
						w = ceil((at - now) / 1000)
						if w < 1 then
							w = 1
						elseif w > MAX_MS then
							w = MAX_MS
						end
					end
					-- The longest wait, the first bucket of it: the token
					-- buckets were decided first, so an earlier bucket wins
					-- a tie.
					local a, b = w, wait
					if a == -1 then
						a = HUGE
					end
					if b == -1 then
						b = HUGE
					end
					if a > b or a == b and i < lim then
						lim, wait = i, w
					end
				end
			end
		end
	end
end
