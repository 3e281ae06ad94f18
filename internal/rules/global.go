package rules

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// MinGlobalPeriod is the shortest period of a global rate rule. A global
// rate is counted in ledger windows of its period, and a Region leases at
// least once per window per busy subject: a minute keeps that to one
// cross-Region write a minute, where a second would be sixty.
const MinGlobalPeriod = Period(time.Minute)

// GlobalKey returns the ledger identity of r's budget: the first 16 bytes
// of SHA-256 over its scope (API, route, subject, kind and dimension), in
// hex. Every Region applies the same rules file, so the same rule has the
// same scope everywhere, while its ID is each Region's own.
func GlobalKey(r Rule) string {
	h := sha256.New()
	for _, s := range []string{r.API, r.Route, r.Subject, string(cmp.Or(r.Kind, Rate)), NormalizeDimension(r.Dimension)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// globalProblems reports what a global rule cannot combine with: shadow
// mode (a global shadow would lease real budget it never spends), an
// admission floor (a Region's pool is no bucket to keep a floor in), a
// durable quota (the ledger's write already is the durable one) and a rate
// period under MinGlobalPeriod.
func globalProblems(v *validator, mode Mode, minRemaining *int64, durable bool, kind Kind, period Period) {
	if mode == Shadow {
		v.add("global", "cannot be combined with mode shadow: try the limit as a regional shadow rule first")
	}
	if minRemaining != nil && *minRemaining != 0 {
		v.add("global", "cannot be combined with min_remaining")
	}
	if durable {
		v.add("global", "cannot be combined with durable: the ledger's write is already replicated")
	}
	if kind == Concurrency {
		v.add("global", "cannot be combined with kind concurrency: requests in flight are counted in each Region's Redis, where they are released")
		return
	}
	if kind != Quota && period != 0 && period < MinGlobalPeriod {
		v.add("period", "must be at least 1m for a global rate rule")
	}
}
