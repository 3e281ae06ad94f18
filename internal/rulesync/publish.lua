-- publish.lua stores a rules snapshot and its version together, unless
-- Redis already holds that version or a newer one: of two admin writes
-- publishing out of order, the older set never replaces the newer.
--
-- KEYS[1]  the version key: the published version, in decimal
-- KEYS[2]  the snapshot key: the encoded set (see format.go)
--          Both share one hash tag ({rules}), so one slot in a cluster.
-- ARGV[1]  the set's version, in decimal (microseconds since 1970: below
--          2^53, so exact as a Lua number)
-- ARGV[2]  the encoded set, or "" when it is too large to store: the
--          version moves and the snapshot key is deleted, so authorizers
--          load from the database rather than an older snapshot
--
-- Reply: {1, ARGV[1]} when published; {0, current} when the version key
-- already held current >= ARGV[1] (nothing written).
local current = tonumber(redis.call('GET', KEYS[1]))
local version = tonumber(ARGV[1])
if current and current >= version then
  return {0, current}
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[2])
end
redis.call('SET', KEYS[1], ARGV[1])
return {1, version}
