-- lease_return.lua: give the unused tokens of a lease back to its buckets.
--
-- A lease (lease.go) charged k*cost tokens from every bucket of a request
-- through bucket.lua and admitted some of those requests locally; this
-- script adds the tokens it did not use back, never above full. It reads
-- and writes the stored form bucket.lua documents in its header,
-- "<tat> <T> <burst>" (GCRA: <tat> the time the bucket is full again, in
-- microseconds since 2024-01-01 UTC; <T> microseconds per token; <burst>
-- the capacity), and takes its clock from Redis TIME as bucket.lua does.
--
-- KEYS and ARGV are bucket.lua's, built by the same code (call.build):
-- KEYS[i]        bucket i's key
-- ARGV[1]        tokens to give back to every bucket, integer > 0
-- ARGV[4i-2..4i+1], for bucket i: limit, period (us), burst, shadow; the
--                numbers the lease was charged with.
--
-- For each bucket, nothing is given back (and nothing written) when:
--   - limit is 0 (never charged);
--   - the key is missing, or its <tat> is not above now: the bucket is
--     full already;
--   - the value is not exactly "<tat> <T> <burst>" (the previous version's
--     "<tat>" alone, or anything else): it is not what the lease's charge
--     wrote, so the tokens are not known to be in it;
--   - the stored <T> or <burst> differ from this bucket's: the numbers
--     changed since the lease (bucket.lua converted the bucket), and what
--     the lease used is no longer expressed in them. Returning nothing
--     never over-admits; guessing could.
-- Otherwise <tat> moves back by tokens*T, not below now (full at most); a
-- bucket that becomes full is deleted (a missing key is full), else it is
-- written back with the PX bucket.lua would give it (1 ms after full).
--
-- Buckets are independent here: each gives back only tokens it was charged
-- and that were never admitted, so a bucket that refuses does not stop the
-- others.
--
-- Reply: a string of space-separated integers, per bucket the tokens given
-- back, rounded (0 when refused or already full).

if redis.replicate_commands then
	redis.replicate_commands()
end

local tonumber, ceil, floor, match, HUGE = tonumber, math.ceil, math.floor, string.match, math.huge
local t = redis.call('TIME')
local now = (tonumber(t[1]) - 1704067200) * 1000000 + tonumber(t[2])
local n = tonumber(ARGV[1])
local MAX_MS = 3153600000000
local out = {}

for i = 1, #KEYS do
	local o = 4 * i - 2
	local limit = tonumber(ARGV[o])
	local back = 0
	if n and n > 0 and limit and limit > 0 then
		-- The same doubles bucket.lua computes and stores.
		local T = tonumber(ARGV[o + 1]) / limit
		local burst = tonumber(ARGV[o + 2])
		local v = redis.call('GET', KEYS[i])
		if v then
			local a, b, c = match(v, '^(%S+) (%S+) (%S+)$')
			local tat, Ts, bs = tonumber(a), tonumber(b), tonumber(c)
			if tat and Ts and bs and Ts == T and bs == burst and T > 0 and T < HUGE and tat > now then
				local used = (tat - now) / T
				back = n
				if back > used then
					back = used
				end
				tat = tat - back * T
				if tat <= now then
					redis.call('DEL', KEYS[i])
				else
					local px = ceil((tat - now) / 1000) + 1
					if px > MAX_MS then
						px = MAX_MS
					end
					redis.call('SET', KEYS[i], string.format('%.17g %.17g %s', tat, T, ARGV[o + 2]), 'PX', string.format('%d', px))
				end
			end
		end
	end
	-- Rounded: what was used is a fraction of a token short of a whole
	-- one as the bucket refills.
	out[i] = string.format('%d', floor(back + 0.5))
end
return table.concat(out, ' ')
