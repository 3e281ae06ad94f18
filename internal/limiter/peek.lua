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
