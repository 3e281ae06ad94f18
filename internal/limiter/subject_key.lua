-- subject_key.lua: record which subject hash key names the buckets under a
-- key prefix, or read the one already recorded.
--
-- Every process that names a subject's buckets (an embedded
-- ratelimit.Limiter, the admin API's reset, refund and peek) must hash
-- subjects under the same key, or each acts on buckets the others never
-- see. The first one records its key's id; every later one compares.
--
-- KEYS[1]  <prefix>{rules}:subject-key, next to the rules snapshot
-- ARGV[1]  the caller's key id: 32 lowercase hex characters, the first 16
--          bytes of HMAC-SHA256(key, "\0sluice subject key id")
--
-- Reply: the key id recorded, a string: ARGV[1] when none was (it is then
-- recorded, without expiry), else the one stored, unchanged.
local recorded = redis.call('GET', KEYS[1])
if recorded then
	return recorded
end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
