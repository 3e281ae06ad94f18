-- charge.lua: check and charge 1..N buckets of one subject, atomically
-- (Allow): token buckets (rate rules) and calendar quotas (quota rules).
-- It runs after bucket.lua, which describes the buckets, their stored
-- forms and their arguments.
--
-- Either every enforcing bucket has what the request needs and every bucket
-- that has <cost> tokens is charged, or nothing is charged (a deny leaves
-- every bucket as it was, but for one it converts to new numbers, see
-- bucket.lua, "A change of numbers").
--
-- KEYS[i]        bucket i's key (bucket.lua)
-- ARGV[1]        cost: tokens to take from every bucket, integer >= 1
-- ARGV[4i-2..4i+1]  bucket i's limit, period, burst and flags (bucket.lua)
--
-- bucket.lua's step 1 has read and decided every bucket (charging: true)
-- and charged the quotas before the first that denies. A lease runs this
-- file too, every quota's window end read (every_end: true), and
-- lease.lua after it.
--
-- A charge costs a quota one INCRBY, which keeps the expiry, and no read.
-- Step 1 reads and decides the token buckets, then the quotas in order,
-- and a quota before the first bucket that denies (token bucket or quota)
-- is charged as it is read; the charge is undone below (DECRBY; a key the
-- charge made is deleted) when a later bucket denies, or for a shadow
-- quota without the tokens. (Reading a quota before charging it
-- would cost every charge a GET; charging first costs a deny by a later
-- bucket an INCRBY and its undo, and a deny is the rarer call, mostly
-- answered by the local deny cache anyway.) The result is exactly what
-- reading first would give, all within one script, so no one sees the
-- undone charge; only the replication stream and the AOF carry it. The
-- window's end is read for a quota about to deny (for its retry), the
-- limiting quota of the reply (for its reset), and a key the INCRBY may
-- have made.
--
-- Errors: the first write is a quota's INCRBY, a pcall (a value it refuses
-- is a fresh window), or a token bucket's SET in step 3; after it the
-- script only reads (GET, PEXPIRETIME, PTTL), computes, and writes what
-- cannot fail for a reason of ours: a SET of a value it formatted,
-- PEXPIREAT, DECRBY of its own INCRBY, DEL. So it never fails after a
-- write.
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

-- Undo what step 1 charged and the request does not: every quota on a deny,
-- a shadow quota without the tokens (a shadow is charged only when it has
-- them, and one without them is in the mask). A window step 1 started
-- loses its key (nothing of it was there, or nothing valid); any other
-- gets DECRBY of the INCRBY: both leave the key as it was (the expiry
-- too), and neither can fail.
if spec and (allowed == 0 or mask > 0) then
	for i = 1, n do
		local c = st[4 * i]
		if st[4 * i - 1] == -1 and c and (allowed == 0 or st[4 * i - 2] + EPS < cost) then
			if c == 2 then
				redis.call('DEL', KEYS[i])
			else
				redis.call('DECRBY', KEYS[i], cs)
			end
			st[4 * i] = false
		end
	end
end

if allowed == 1 then
	wait = 0
	-- 2. Compute every charge, and find the limiting bucket: fewest tokens
	-- left, enforcing buckets first. Nothing more is written yet (quotas
	-- were, in step 1).
	for i = 1, n do
		local T, h = st[4 * i - 1], st[4 * i - 2]
		if T > 0 and h + EPS >= cost then
			local at = st[4 * i - 3] + cost * T
			h = h - cost
			local ttl = ceil((at - now) / 1000) + 1
			if ttl > MAX_MS then
				ttl = MAX_MS
			end
			st[4 * i - 3], st[4 * i - 2], st[4 * i] = at, h, format('%d', ttl)
		elseif T == -1 and st[4 * i] then
			-- A quota charged in step 1.
			h = h - cost
			st[4 * i - 2] = h
		elseif T == -2 and h >= 1 then
			-- A concurrency bucket with a free slot (a shadow one may
			-- have none): the request takes one.
			h = h - 1
			st[4 * i - 2], st[4 * i] = h, 'c'
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

-- 3. Write every charged token bucket, and every one converted to new
-- numbers (also on a deny). Only SETs of what was computed from here on:
-- nothing after the first can fail for a reason of ours.
-- A whole <tat> and <T> (T is whole when the limit divides the period in
-- microseconds; tat then stays whole) are written with %d, which prints
-- what %.17g prints for an integer of at most 16 digits, without the cost
-- of printing a double: the same stored value. Beyond that (a bucket out
-- of bucket.lua's bounds; %d would overflow) and for an infinite tat
-- (x % 1 is NaN) it is %.17g.
for i = 1, n do
	local T = st[4 * i - 1]
	if st[4 * i] and T >= 0 then
		local at, f = st[4 * i - 3], '%.17g %.17g %s'
		if at % 1 == 0 and T % 1 == 0 and at < 1e16 and at > -1e16 and T < 1e16 then
			f = '%d %d %s'
		end
		redis.call('SET', KEYS[i], format(f, at, T, ARGV[4 * i]), 'PX', st[4 * i])
	elseif st[4 * i] == 'c' then
		-- The request's slot, expiring at now + TTL; the expired ones go,
		-- and the key lives as long as its last slot (a TTL shortened by
		-- an edit leaves an older, later slot the last).
		local key = KEYS[i]
		redis.call('ZREMRANGEBYSCORE', key, '-inf', format('%d', now))
		redis.call('ZADD', key, format('%d', now + tonumber(ARGV[4 * i])), string.sub(ARGV[4 * i + 1], 3))
		local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
		redis.call('PEXPIREAT', key, format('%d', tonumber(last[2]) / 1000 + 1704067200001))
	end
end

-- The reply.
local r = floor(st[4 * lim - 2] + EPS)
if r < 0 then
	r = 0
end
local reset, at = 0, st[4 * lim - 3]
if not at then
	-- A quota whose end step 1 did not read: its key's expiry (one without
	-- is the stray key of bucket.lua's "Quotas": reset 0).
	at = expiry(KEYS[lim]) or now
end
if st[4 * lim - 1] ~= 0 then
	reset = ceil((at - now) / 1000)
	if reset < 0 then
		reset = 0
	elseif reset > MAX_MS then
		reset = MAX_MS
	end
end
-- Every %d is a sprintf: constant fields are written out.
local out
if allowed == 1 then
	out = format('1 %d %d %d 0 %d', lim, r, reset, mask)
else
	out = format('0 %d %d %d %d %d', lim, r, reset, wait, mask)
end
-- The script returns out (script.go); a lease's first names its windows
-- (lease.lua).
