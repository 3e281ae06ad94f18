-- usage.lua: a usage report (Charge): charge or refund 1..N buckets of one
-- subject with no admission decision, atomically. It runs after
-- bucket.lua, which describes the buckets, their stored forms and their
-- arguments.
--
-- Every bucket with a limit, shadows and enforcing alike, is charged cost
-- tokens whatever it holds: it may go into debt, at most one burst (a
-- quota's used at most twice its limit; a larger debt is clamped there),
-- and later requests are denied, with the right retry, until it has
-- refilled (a quota: until its window ends). Debt at most one burst keeps
-- a token bucket full again within twice its refill horizon, 20 years, so
-- every time stays exact. A negative cost refunds, never above full (used
-- never below 0). A token bucket that changed numbers is converted first
-- (bucket.lua); with cost 0 that conversion is all that is written. Every
-- quota's window end is read, and a fresh window's key is written with its
-- expiry.
--
-- KEYS[i]        bucket i's key (bucket.lua)
-- KEYS[N+1]      the report's idempotency key, optional: when it exists
--                the report is a retry and nothing is written; else the
--                charge is written and the key set for 24 h (PX
--                86400000), in the same call, so concurrent retries count
--                once
-- ARGV[1]        cost: tokens to charge every bucket, an integer; negative
--                refunds
-- ARGV[4i-2..4i+1]  bucket i's limit, period, burst and flags (bucket.lua)
--
-- Errors: every value is computed before the first write, and every write
-- is a SET of a value formatted here.
--
-- Reply: "u <duplicate>" then, per bucket, " <remaining> <reset>":
--   duplicate    1 when the idempotency key was there (nothing charged),
--                else 0
--   remaining    whole tokens after the report, negative in debt
--   reset        milliseconds until the bucket is full again (a quota:
--                until its window ends; 0 when blocked), 0 to MAX_MS

local dup = 0
local idem = KEYS[n + 1]
if idem and redis.call('EXISTS', idem) == 1 then
	dup = 1
end

-- What the report makes of every bucket (bucket.lua's step 1 read them,
-- every window's end); the writes wait in sets until every bucket is
-- computed.
local out, sets = 'u ' .. dup, {}
for i = 1, n do
	local at, h, T = st[4 * i - 3], st[4 * i - 2], st[4 * i - 1]
	if T == -1 then
		local limit = tonumber(ARGV[4 * i - 2])
		if dup == 0 and cost ~= 0 then
			local used = limit - h + cost
			if used < 0 then
				used = 0
			elseif used > 2 * limit then
				used = 2 * limit
			end
			h = limit - used
			-- A window that has a key keeps its expiry.
			if fresh and fresh[i] then
				sets[#sets + 1] = { KEYS[i], format('%d', used), 'PXAT', fresh[i] }
			else
				sets[#sets + 1] = { KEYS[i], format('%d', used), 'KEEPTTL' }
			end
		end
	elseif T > 0 then
		local px = st[4 * i]
		if dup == 0 and cost ~= 0 then
			local burst = tonumber(ARGV[4 * i])
			at = at + cost * T
			if at < now then
				at = now
			elseif at > now + 2 * burst * T then
				at = now + 2 * burst * T
			end
			h = (now - at) / T + burst
			px = ceil((at - now) / 1000) + 1
			if px > MAX_MS then
				px = MAX_MS
			end
			px = format('%d', px)
		end
		if dup == 0 and px then
			-- Charged, or only converted to new numbers (cost 0).
			sets[#sets + 1] = { KEYS[i], format('%.17g %.17g %s', at, T, ARGV[4 * i]), 'PX', px }
		end
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
	out = out .. format(' %d %d', floor(h + EPS), reset)
end

for _, s in ipairs(sets) do
	redis.call('SET', unpack(s))
end
if idem and dup == 0 then
	redis.call('SET', idem, '1', 'PX', 86400000)
end
