package limiter

import "strings"

// LuaSource is the Lua of the charge scripts, for the programs that
// measure it (tools/scriptcost); nothing on the request path reads it.
type LuaSource struct {
	// Charge is the script Allow runs for any request but the commonest,
	// as Redis runs it: a first line setting its locals, Bucket, then
	// charge.lua's code.
	Charge string
	// ChargeOne is the script Allow runs for one enforcing token bucket
	// with no floor (charge_one.lua), as Redis runs it.
	ChargeOne string
	// Bucket is bucket.lua with stored.lua put in: the part Charge shares
	// with the other scripts.
	Bucket string
}

// Lua returns the charge scripts' source.
func Lua() LuaSource {
	return LuaSource{Charge: chargeSrc, ChargeOne: chargeOneSrc, Bucket: bucketSrc}
}

// ChargeArgs returns the KEYS and ARGV that Allow sends either charge
// script for amount tokens of subject's buckets bs under prefix, with the
// unkeyed subject hash. bs name no subject of their own.
func ChargeArgs(prefix, subject string, amount int64, bs []Bucket) (keys []string, args []any) {
	c := buildCalls.Get().(*call)
	defer buildCalls.Put(c)
	c.build(prefix, &subjects{id: digestOf(subject)}, amount, bs)
	for _, k := range c.keys {
		keys = append(keys, strings.Clone(k))
	}
	for i := range c.args {
		args = append(args, string(c.argv[i]))
	}
	return keys, args
}
