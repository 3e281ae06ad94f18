// Package rulesync distributes the rules from the store to every process
// that decides on them: the admin path publishes each committed set to
// Redis (Snapshots), and each authorizer keeps a Cache of the compiled
// rules.Snapshot in step with it (polling the published version, loading
// the published set, falling back to the store). Both halves of that one
// contract live here; package rules stays the model (validation, matching,
// the immutable snapshot) with no I/O.
//
// Snapshots keep a copy of the rules in Redis for the
// authorizers: after every write the admin path publishes the committed
// set (rules.Set) as one compact, versioned value, and moves the version
// key every warm authorizer polls. An authorizer reloads from that value
// (one GET) instead of the database, and a cold one starts from it while
// the database is down. PostgreSQL stays the source of truth.
//
// Two keys, one hash tag, so one cluster slot:
//
//	<prefix>{rules}:version   the published version, in decimal
//	<prefix>{rules}:snapshot  the encoded set (format.go): header with the
//	                          version and a SHA-256, then gzip'd JSON
//
// A Lua script (publish.lua) writes both at once, and only when the set is
// newer than the snapshot Redis holds, so two writes publishing out of
// order leave the newer set.
//
// Every process that decides holds Redis (to charge buckets), so Redis is
// no proof of who wrote the rules. The rule writers (admin-write, migrate)
// sign each snapshot with an Ed25519 key only they hold
// (SnapshotsOptions.SigningKey); deciders given the public half
// (PublicKey) refuse anything else, and any version from the future, with
// ErrRefused, and load from the store instead. A writer replaces a
// snapshot it refuses rather than defer to its version, so no process
// holding Redis can pin the rules. What it can still do is write back an
// older signed set, which only a cold decider adopts, until its next
// load from the store (RULES_REFRESH) or the next publish.
package rulesync
