-- cas.lua: set the subject-key record to a key id if it holds one of the
-- values expected, and say what it held: the compare-and-set behind
-- Record.Deploy and Record.Rotate.
--
-- KEYS[1]   <prefix>{rules}:subject-key, next to the rules snapshot
-- ARGV[1]   the key id to record: 32 lowercase hex characters
-- ARGV[2..] the values it may replace; "" stands for no record
--
-- Reply: {before, set}: the value held before ("" for none), and 1 when
-- it matched an expected value (the record now holds ARGV[1], without
-- expiry), else 0 (unchanged).
local before = redis.call('GET', KEYS[1]) or ''
for i = 2, #ARGV do
	if before == ARGV[i] then
		if before ~= ARGV[1] then
			redis.call('SET', KEYS[1], ARGV[1])
		end
		return {before, 1}
	end
end
return {before, 0}
