-- stored.lua: a token bucket's stored value, read (bucket.lua, "Stored
-- value" and "A change of numbers"). Not a script: script.go puts it where
-- bucket.lua and charge_one.lua say "-- #include stored.lua", inside their
-- "if v then", so that both read a value by one text, at no cost of a
-- function call.
--
-- In: v, the GET's value (a string); now; T and burst, the bucket's us per
-- token and capacity; at = now. Out: at, when the bucket is full again in
-- these numbers (now when full); px, the PX (ms, a number) of the write
-- that a conversion to new numbers owes even on a deny, else unchanged
-- (false). Needs the locals match, tonumber, HUGE, ceil and MAX_MS.
--
-- The stored form first: a tonumber of the whole value would read its
-- first number before failing at the space (no value of three fields is a
-- number).
local tat, Ts, bs = nil, T, burst
local a, b, c = match(v, '^(%S+) (%S+) (%S+)$')
if a then
	tat, Ts, bs = tonumber(a), tonumber(b), tonumber(c)
	-- Not a number (nil), NaN, 0, negative or inf: full.
	if not (Ts and bs and Ts > 0 and Ts < HUGE and bs > 0 and bs < HUGE) then
		tat = nil
	end
else
	-- The previous version's "<tat>" (or anything else: full).
	tat = tonumber(v)
end
-- Else full (tat nil or NaN, or in the past): TIME may even have gone
-- back (failover).
if tat and tat > at then
	at = tat
	if Ts ~= T or bs ~= burst then
		-- New numbers: keep what was used (at most the new burst), and
		-- write it back even on a deny.
		local used = (at - now) / Ts
		if used > burst then
			used = burst
		end
		at = now + used * T
		px = ceil((at - now) / 1000) + 1
		if px > MAX_MS then
			px = MAX_MS
		end
	end
end
