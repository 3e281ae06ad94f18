// Command rediscost measures what the limiter costs Redis, on a private
// redis-server it starts (redis-server on the PATH). Every measurement
// takes turns, rounds times, the order reversed every other round, and
// reads Redis's own counters: CPU per call (INFO cpu, user + sys) and
// usec_per_call (INFO commandstats, reset before each turn). On a shared
// machine a round swings by tens of percent; the pairing and the median of
// many rounds make a few percent visible. docs/performance.md has runs.
//
//	rediscost decision [-n 100000] [-rounds 5] [-only bare,...]
//
// prints, as a Markdown table, a decision's cost beside a PING and
// go-redis/redis_rate's GCRA script, 16 callers over 10,000 subjects, every
// decision an allow. The contenders:
//
//	ping       PING
//	redis_rate redis_rate.Limiter.Allow, one GCRA limit
//	bare       limiter.Allow, one token bucket, no leases, no deny cache
//	inflight   bare with a concurrency rule too: the decision, then the
//	           release (ZREM) that ends the request
//	deployed   the authorizer's decision as app.NewDecider builds it (rules
//	           cache, deny cache, leases on: LEASE_MAX 64), one rule for
//	           every subject (DEFAULT_LIMIT)
//	deployed-leases-off  the same with LEASE_MAX=1
//	floor      a script of TIME, GET and SET PX with constant values: what
//	           any exact bucket on Redis's clock pays at least
//	empty      a script that returns 1: the cost of EVALSHA itself
//
//	rediscost dump DIR
//
// writes the charge scripts as Redis runs them (charge.lua,
// charge_one.lua) into DIR, for scripts/script-cost.sh.
//
//	rediscost ab [-rounds 60] DIR
//
// compares charge_one.lua, what this tree runs for a one-bucket allow,
// with an older charge.lua, and prints the quartiles of new/old: DIR
// holds its bucket.lua and charge.lua (and stored.lua if it had one):
// `for f in bucket charge stored; do git show REV:internal/limiter/$f.lua > DIR/$f.lua; done`.
//
//	rediscost quota [-rounds 14]
//
// takes apart what two calendar quotas add to a decision over two token
// buckets: the 2-bucket charge against the 2 rate + 2 quota charge, and
// against variants of it that are wrong on purpose, each cutting one part:
//
//	quota loop without INCRBY  the quotas' keys, arguments and code, the
//	                           INCRBY replaced by a constant
//	quota loop cut to INCRBY   the quota code cut to its INCRBY and two
//	                           stores: the least Lua a charged quota needs
//	INCR for INCRBY            the same script with INCR (cost 1)
//	no quota loop              the quotas' keys and arguments, carried
//	                           through step 1's first loop and step 2,
//	                           but never read or charged
package main

import (
	"errors"
	"fmt"
	"os"
)

var errUsage = errors.New("usage: rediscost decision [-n N] [-rounds N] [-only NAMES] | dump DIR | ab [-rounds N] DIR | quota [-rounds N]")

func main() {
	err := errUsage
	if len(os.Args) > 1 {
		switch cmd, args := os.Args[1], os.Args[2:]; cmd {
		case "decision":
			err = decisionCost(args)
		case "dump", "ab", "quota":
			err = scriptCost(cmd, args)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rediscost:", err)
		os.Exit(1)
	}
}
