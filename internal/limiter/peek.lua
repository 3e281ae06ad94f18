-- peek.lua: report 1..N buckets of one subject as a charge of 1 would see
-- them, and write nothing (Peek; Allow with cost 0). It runs after
-- bucket.lua, which describes the buckets, their stored forms and their
-- arguments. A bucket that changed numbers is reported converted (and left
-- as it is stored); every quota's window end is read.
--
-- KEYS[i]        bucket i's key (bucket.lua)
-- ARGV[1]        "0" (the cost of a peek; the decision is a cost 1's)
-- ARGV[4i-2..4i+1]  bucket i's limit, period, burst and flags (bucket.lua)
--
-- Reply: one string of space-separated integers
--   <allowed> <index> <remaining> <reset> <retry> <shadow mask>
-- as charge.lua's, for a cost of 1 (plus each bucket's floor) that is not
-- charged, then, per bucket, " <remaining> <reset>": its whole tokens now
-- and the milliseconds until it is full (a quota: until its window ends;
-- 0 when blocked), 0 to MAX_MS.

local allowed, mask, lim, wait = 1, 0, 0, -2

-- Read every quota (bucket.lua read the token buckets) and decide, as
-- charge.lua does.
for i = 1, n do
	local flags = ARGV[4 * i + 1]
	local shadow, need = flags == '1', 1
	if flags ~= '0' and not shadow then
		local sh, fl = match(flags, '^([01]) (%d+)$')
		shadow, need = sh == '1', 1 + tonumber(fl)
	end
	if st[4 * i - 1] < 0 then
		local limit = tonumber(ARGV[4 * i - 2])
		local used, at = quota(KEYS[i], nil, limit, HUGE, ARGV[4 * i - 1], ARGV[4 * i])
		st[4 * i - 3], st[4 * i - 2] = at, limit - used
	end
	if st[4 * i - 2] + EPS < need then
		if shadow then
			mask = mask + 2 ^ (i - 1)
		else
			allowed = 0
			lim, wait = deny(st, lim, wait, i, need, now)
		end
	end
end

if allowed == 1 then
	-- The limiting bucket: fewest tokens, enforcing buckets first.
	wait = 0
	for i = 1, n do
		local f = ARGV[4 * i + 1]
		if (f == '0' or f ~= '1' and byte(f) == 48) and (lim == 0 or st[4 * i - 2] < st[4 * lim - 2]) then
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

-- The reply: the limiting bucket (i = 0), then every bucket.
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
	if st[4 * b - 1] ~= 0 then
		reset = ceil((st[4 * b - 3] - now) / 1000)
		if reset < 0 then
			reset = 0
		elseif reset > MAX_MS then
			reset = MAX_MS
		end
	end
	if i == 0 then
		out = format('%d %d %d %d %d %d', allowed, lim, r, reset, wait, mask)
	else
		out = out .. format(' %d %d', r, reset)
	end
end
return out
