-- lease_return.lua: give the unused tokens of a lease back to its buckets.
--
-- A lease (lease.go) charged k*cost tokens from every bucket of a request
-- through charge.lua (or lease.lua) and admitted some of those requests
-- locally; this script gives the tokens it did not use back, never above
-- full, and never to anything the lease did not charge. It reads and
-- writes the stored forms bucket.lua documents in its header and takes its
-- clock from Redis TIME as bucket.lua does. It stands alone, not after
-- bucket.lua: it reads those forms strictly and converts nothing.
--
-- KEYS and ARGV[1..4N+1] are the charge's, built by the same code
-- (call.build), N = #KEYS:
-- KEYS[i]        bucket i's key
-- ARGV[1]        tokens to give back to every bucket, integer > 0
-- ARGV[4i-2..4i+1], for bucket i: limit, period, burst, flags; the
--                arguments the lease was charged with (a quota's period
--                is its window's letter).
-- ARGV[4N+1+i]   bucket i's window end as the lease call's reply gave it
--                (lease.lua): a quota's end in Unix ms, "0" for
--                a token bucket. Missing or "0" for a quota: nothing back.
--
-- A token bucket ("<tat> <T> <burst>"): nothing is given back (and nothing
-- written) when
--   - limit is 0 (never charged);
--   - the key is missing, or its <tat> is not above now: the bucket is
--     full already;
--   - the value is not exactly "<tat> <T> <burst>" (the previous version's
--     "<tat>" alone, a quota's value, anything else): it is not what the
--     lease's charge wrote, so the tokens are not known to be in it;
--   - the stored <T> or <burst> differ from this bucket's: the numbers
--     changed since the lease (a charge converted the bucket), and what
--     the lease used is no longer expressed in them. Returning nothing
--     never over-admits; guessing could.
-- Otherwise <tat> moves back by tokens*T, not below now (full at most); a
-- bucket that becomes full is deleted (a missing key is full), else it is
-- written back with the PX a charge would give it (1 ms after full).
--
-- A quota (its key holds the window's used and expires with the window;
-- the key names the unit and anchor): its used goes down by tokens, never
-- below 0, only when the key is the window the lease charged: a
-- non-negative integer whose expiry is the end the lease's reply named. The
-- reply read that end from the same expiry, or set it (before Redis 7.0 it
-- is read from PTTL, to a millisecond or two), and two windows of a key
-- end at least a day apart: an end within a second of it is that window.
-- Any other key (it expired with its window and a later one began, no
-- expiry, not an integer, missing) is a window the lease never charged:
-- nothing back. A change of the quota's limit keeps the window (a charge
-- keeps used), so the tokens do go back: used counts tokens, whatever the
-- limit. The write keeps the expiry (KEEPTTL).
--
-- Why not a usage report's refund (usage.lua)? It would convert a token
-- bucket to new numbers and then refund in them, and give a quota's
-- tokens to whatever window is current: both over-admit after a change or
-- a window's end. Its guards would be per-bucket arguments of its own.
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
	local p = ARGV[o + 1]
	if n and n > 0 and limit and limit > 0 and p and string.byte(p) > 57 then
		-- A quota: only to the window the lease charged.
		local charged = tonumber(ARGV[4 * #KEYS + 1 + i])
		local v = redis.call('GET', KEYS[i])
		if v and charged and charged > 0 and #v < 16 and (v == '0' or match(v, '^[1-9]%d*$')) then
			-- The window's end, 1 ms after the key's expiry: PEXPIRETIME
			-- (Redis 7.0+), else from PTTL.
			local used, e = tonumber(v), redis.pcall('PEXPIRETIME', KEYS[i])
			if type(e) ~= 'number' then
				e = redis.call('PTTL', KEYS[i])
				if e >= 0 then
					e = floor(now / 1000) + 1704067200000 + e
				end
			end
			e = e + 1
			if e > 0 and used > 0 and e - charged < 1000 and charged - e < 1000 then
				back = n
				if back > used then
					back = used
				end
				redis.call('SET', KEYS[i], string.format('%d', used - back), 'KEEPTTL')
			end
		end
	elseif n and n > 0 and limit and limit > 0 then
		-- The same doubles a charge computes and stores (bucket.lua, rate).
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
