-- publish.lua stores a rules snapshot and its version together, unless
-- Redis holds a snapshot of that version or a newer one that the publisher
-- trusts: of two admin writes publishing out of order, the older set
-- never replaces the newer, and a snapshot the publisher does not trust
-- (not signed by the rule writers, or from the future) never holds a
-- newer set back.
--
-- KEYS[1]  the version key: the published version, in decimal
-- KEYS[2]  the snapshot key: the encoded set (see format.go)
--          Both share one hash tag ({rules}), so one slot in a cluster.
-- ARGV[1]  the set's version, in decimal (microseconds since 1970: below
--          2^53, so exact as a Lua number)
-- ARGV[2]  the encoded set, or its header alone when it is too large to
--          store (authorizers then load from the database)
-- ARGV[3]  the version of the snapshot the publisher read and trusts, in
--          decimal; 0 when it read none or refused it
-- ARGV[4]  the SHA-1, in hex, of the snapshot's first ARGV[5] bytes as the
--          publisher read them ('' when absent)
-- ARGV[5]  how many bytes of the snapshot the publisher read: its header
--
-- Reply: {1, ARGV[1]} when published; {0, ARGV[3]} when the trusted
-- snapshot is as new or newer (nothing written); {2, 0} when the snapshot
-- changed since the publisher read it (nothing written: read again).
local head = redis.call('GETRANGE', KEYS[2], 0, tonumber(ARGV[5]) - 1)
if redis.sha1hex(head) ~= ARGV[4] then
  return {2, 0}
end
local trusted = tonumber(ARGV[3])
local version = tonumber(ARGV[1])
if trusted >= version then
  return {0, trusted}
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return {1, version}
