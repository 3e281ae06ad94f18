package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RuleSpec is one rule of a scenario as the checker needs it: what it
// matches and its numbers over time.
type RuleSpec struct {
	// ID is the store's id (the RateLimit-Policy item's name); Name is the
	// scenario's short name for it ("api", "search", "bill-1").
	ID, Name string
	// Quota is true for a quota (one window spans the whole run: the
	// anchor puts the window's start an hour before it); else a rate rule.
	Quota bool
	// Durable quotas are acknowledged only once a replica has the charge.
	Durable bool
	// Route and Subject are the rule's scope ("*" matches any).
	Route, Subject string
	// Versions are the rule's numbers in time order; the first holds from
	// the start.
	Versions []Version
}

// Version is a rule's numbers from From (Unix ns; 0 for the start) until
// Until (0 for the end): after a change the old numbers hold until the
// last decision host has switched.
type Version struct {
	Limit, Burst int64
	Period       time.Duration
	From, Until  int64
}

func (r *RuleSpec) applies(o *Op) bool {
	return (r.Route == "*" || r.Route == o.Route) && (r.Subject == "*" || r.Subject == o.Subject)
}

// Bounds are the over-admission a scenario promises, written down before
// it runs (docs/RELIABILITY.md, "Faults on a real network").
type Bounds struct {
	// LostWindow is W: the charges a subject made within it may be lost
	// (acknowledged by a primary that then loses them). A rate rule's
	// excess is then at most what its bucket admits in W, burst +
	// limit·W/period; a quota's at most what the subject's API-wide rate
	// rule admits in W. Durable quotas promise no excess.
	LostWindow time.Duration
	// LeaseTTL is how long a leased token may be admitted after Redis
	// charged it: every rate window is widened by it.
	LeaseTTL time.Duration
	// Propagation is how soon after connectivity returns every host
	// enforces a changed rule.
	Propagation time.Duration
}

// Event is a moment of a scenario's timeline (Unix ns).
type Event struct {
	Kind string `json:"kind"` // fault, heal, promoted, change
	At   int64  `json:"at"`
}

// Change is the rule change a scenario makes during its fault.
type Change struct {
	// Rule is the changed rule's id; Q is its burst after the change (the
	// q= of its RateLimit-Policy item).
	Rule string
	Q    int64
	// Ready is when every host could see it: the later of the write's
	// acknowledgement and the end of the fault.
	Ready int64
}

// Result is the checker's verdict on one scenario's history.
type Result struct {
	// Scenario names the scenario; Fault describes it.
	Scenario, Fault string
	// Decisions answered (200 or 429), and how many of them failed open
	// or closed; Errors got no answer (shed requests not counted).
	Decisions, FailOpen, FailClosed, Errors, Shed int
	// Excess is the worst (subject, rule) of each kind: rate rules,
	// quotas, durable quotas.
	Rate, Quota, Durable Excess
	// Gap is the longest time a decision host gave no decision Redis
	// made; Recovery is the time from the end of the fault until a full
	// second without a degraded decision.
	Gap, Recovery time.Duration
	// Propagation is the slowest host's time from the change's Ready to
	// its last decision under the old numbers; -1 when no change was made.
	Propagation time.Duration
	// Quota latencies (send to answer) of the default and the durable
	// quotas' requests, over the whole run: p50 and p99.
	QuotaP50, QuotaP99, DurableP50, DurableP99 time.Duration
	// Problems lists every bound the history broke; empty means the run
	// held every bound.
	Problems []string
	// Global is a global scenario's verdict (then the fields above past
	// the counts are zero); nil for the others.
	Global *GlobalResult
}

// Excess is the most admitted beyond a limit for one (subject, rule), and
// its bound.
type Excess struct {
	Max, Bound int64
	Where      string // "subject/rule"
	Checked    int    // (subject, rule) pairs checked
}

func (e *Excess) add(got, bound int64, where string) {
	e.Checked++
	if got > e.Max || e.Where == "" {
		e.Max, e.Bound, e.Where = got, bound, where
	}
}

// Check computes r's verdict on ops: for each subject and rule, the most
// admitted over any window beyond burst + limit·T/period (rate rules, T
// widened by the lease TTL) or limit (quotas), against b; the fail-open
// and fail-closed decisions, gaps, recovery and the change's propagation.
// healAt is when the fault ended (0: it never did).
func Check(scenario string, ops []Op, rules []RuleSpec, b Bounds, healAt int64, ch *Change) Result {
	res := Result{Scenario: scenario, Propagation: -1}
	for i := range ops {
		res.count(&ops[i])
	}
	if res.Shed > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d requests shed: the load client could not keep its schedule", res.Shed))
	}

	// Enforced admissions by subject.
	bySubject := map[string][]Op{}
	for _, o := range ops {
		if o.Answered() && o.Allowed && !o.FailOpen {
			bySubject[o.Subject] = append(bySubject[o.Subject], o)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(bySubject)) {
		adm := bySubject[s]
		slices.SortFunc(adm, func(a, b Op) int { return cmp.Compare(a.Send, b.Send) })
		for i := range rules {
			r := &rules[i]
			mine := slices.DeleteFunc(slices.Clone(adm), func(o Op) bool { return !r.applies(&o) })
			if len(mine) == 0 {
				continue
			}
			where := s + "/" + r.Name
			if r.Quota {
				limit := slices.MaxFunc(r.Versions, func(a, b Version) int { return cmp.Compare(a.Limit, b.Limit) }).Limit
				got := int64(len(mine)) - limit
				ex, bound := &res.Quota, quotaBound(rules, &mine[0], b.LostWindow)
				if r.Durable {
					ex, bound = &res.Durable, 0
				}
				ex.add(got, bound, where)
				if got > bound {
					res.Problems = append(res.Problems, fmt.Sprintf("%s: %d admitted against a quota of %d: excess %d > bound %d", where, len(mine), limit, got, bound))
				}
				continue
			}
			got, at := rateExcess(mine, r.Versions, b.LeaseTTL)
			bound := rateBound(r.Versions, b.LostWindow)
			res.Rate.add(got, bound, where)
			if got > bound {
				res.Problems = append(res.Problems, fmt.Sprintf("%s: excess %d > bound %d (%s)", where, got, bound, at))
			}
		}
	}

	res.QuotaP50, res.QuotaP99, res.DurableP50, res.DurableP99 = quotaLatencies(ops, rules)
	res.Gap = longestGap(ops)
	if healAt > 0 {
		res.Recovery = recovery(ops, healAt, time.Second)
	}
	if ch != nil {
		p, problems := propagation(ops, ch)
		res.Propagation = p
		if p > b.Propagation {
			res.Problems = append(res.Problems, fmt.Sprintf("rule change reached the last host %v after connectivity returned: bound %v", p.Round(time.Millisecond), b.Propagation))
		}
		res.Problems = append(res.Problems, problems...)
	}
	return res
}

// count counts o among the answered, shed and failed requests, and the
// fail-open and fail-closed answers; it reports whether o was answered.
func (res *Result) count(o *Op) bool {
	switch {
	case o.Err == "shed":
		res.Shed++
	case !o.Answered():
		res.Errors++
	default:
		res.Decisions++
		if o.FailOpen {
			res.FailOpen++
		}
		if o.FailClosed() {
			res.FailClosed++
		}
		return true
	}
	return false
}

// rateBound is what a rate rule may over-admit when the charges of a
// window W are lost: its bucket's most over W, burst + limit·W/period
// (the largest of its versions'); 0 when nothing can be lost.
func rateBound(vs []Version, w time.Duration) int64 {
	if w <= 0 {
		return 0
	}
	best := 0.0
	for _, v := range vs {
		best = max(best, float64(v.Burst)+float64(v.Limit)*float64(w)/float64(v.Period))
	}
	return int64(math.Floor(best))
}

// quotaBound is what a quota may over-admit when the charges of W are
// lost: the charges of W, at most what the subject's API-wide rate rules
// admit in W.
func quotaBound(rules []RuleSpec, o *Op, w time.Duration) int64 {
	if w <= 0 {
		return 0
	}
	bound := int64(math.MaxInt64)
	for i := range rules {
		if r := &rules[i]; !r.Quota && r.applies(o) {
			bound = min(bound, rateBound(r.Versions, w))
		}
	}
	if bound == math.MaxInt64 {
		return 0
	}
	return bound
}

// rateExcess is the most admissions of adm (sorted by Send) beyond the
// rate bound over any window, with where it was. A window runs from some
// admission's send to some admission's receive; it holds for sure the
// admissions sent and answered inside it (Redis charged each between its
// send and its answer), and Redis charged them within it widened by ttl
// (a leased admission spends a token charged up to a lease TTL earlier).
// The bound over a window of length T is burst + limit·T/period with the
// largest numbers of the versions that held in it.
func rateExcess(adm []Op, vs []Version, ttl time.Duration) (int64, string) {
	n := len(adm)
	recvs := make([]int64, 0, n) // receive times of adm[i:], sorted
	best, where := int64(math.MinInt64), ""
	for i := n - 1; i >= 0; i-- {
		r := adm[i].Recv
		k, _ := slices.BinarySearch(recvs, r)
		recvs = slices.Insert(recvs, k, r)
		start := adm[i].Send
		for m, y := range recvs {
			if y < start {
				continue // cannot happen: an answer comes after its send
			}
			count := int64(m + 1)
			t := y - start + int64(ttl)
			burst, rate := numbers(vs, start-int64(ttl), y)
			bound := int64(math.Floor(float64(burst) + rate*float64(t)))
			if e := count - bound; e > best {
				best = e
				where = fmt.Sprintf("%d admitted in %v, bound %d", count, time.Duration(y-start).Round(time.Millisecond), bound)
			}
		}
	}
	return max(best, 0), where
}

// numbers returns the largest burst and rate (tokens per ns) of the
// versions that held at some time in [from, to].
func numbers(vs []Version, from, to int64) (int64, float64) {
	var burst int64
	var rate float64
	for _, v := range vs {
		if (v.Until == 0 || v.Until >= from) && v.From <= to {
			burst = max(burst, v.Burst)
			rate = max(rate, float64(v.Limit)/float64(v.Period))
		}
	}
	return burst, rate
}

// longestGap is the longest time any decision host went without a
// decision Redis made: between two consecutive non-degraded decisions of
// one host (by send time).
func longestGap(ops []Op) time.Duration {
	last := map[string]int64{}
	var gap int64
	for _, o := range ops { // in Seq order, hence send order
		if o.Err == "shed" || o.Degraded() {
			continue
		}
		if l, ok := last[o.Host]; ok && o.Send-l > gap {
			gap = o.Send - l
		}
		last[o.Host] = o.Send
	}
	return time.Duration(gap)
}

// recovery is the time from healAt to the first moment after which no
// request sent within quiet got a degraded decision (shed requests do not
// count): the service is back when a full quiet period passes clean.
func recovery(ops []Op, healAt int64, quiet time.Duration) time.Duration {
	t := healAt
	for _, o := range ops {
		if o.Err == "shed" || o.Send < healAt {
			continue
		}
		if o.Degraded() && o.Send < t+int64(quiet) {
			t = o.Recv
		}
	}
	return time.Duration(t - healAt)
}

// propagation returns, for the slowest host, the time from ch.Ready to
// the send of its last decision that still enforced the old numbers of the
// changed rule (0 when none came after Ready); a fail-open or fail-closed
// answer, made without Redis, enforces none.
func propagation(ops []Op, ch *Change) (time.Duration, []string) {
	lastOld := map[string]int64{}
	seenNew := map[string]bool{}
	for _, o := range ops {
		if !o.Answered() {
			continue
		}
		q, ok := policyQ(o.Policy, ch.Rule)
		if !ok {
			continue
		}
		if q == ch.Q {
			seenNew[o.Host] = true
		} else if o.Send > ch.Ready && !o.FailOpen && !o.FailClosed() {
			// An old rule enforced after the change was ready. A
			// fail-open or fail-closed answer enforced nothing: the host
			// could not reach Redis yet (its connections still coming
			// back after a partition), and the bound counts from when it
			// can.
			lastOld[o.Host] = max(lastOld[o.Host], o.Send)
		}
	}
	var worst int64
	var problems []string
	for _, h := range decideHosts {
		if !seenNew[h] {
			problems = append(problems, fmt.Sprintf("host %s never enforced the changed rule", h))
		}
		worst = max(worst, lastOld[h]-ch.Ready)
	}
	return time.Duration(max(worst, 0)), problems
}

// policyQ reads the q= of rule's item in a RateLimit-Policy field value
// (`"<id>";q=5;w=1, ...`).
func policyQ(policy, rule string) (int64, bool) {
	for item := range strings.SplitSeq(policy, ",") {
		item = strings.TrimSpace(item)
		name, params, ok := strings.Cut(item, ";")
		if !ok || strings.Trim(name, `"`) != rule {
			continue
		}
		for p := range strings.SplitSeq(params, ";") {
			if v, ok := strings.CutPrefix(p, "q="); ok {
				q, err := strconv.ParseInt(v, 10, 64)
				return q, err == nil
			}
		}
	}
	return 0, false
}

// quotaLatencies returns the p50 and p99 latency of the answered requests
// of default quotas, then of durable ones.
func quotaLatencies(ops []Op, rules []RuleSpec) (p50, p99, d50, d99 time.Duration) {
	var plain, durable []time.Duration
	for i := range ops {
		o := &ops[i]
		if !o.Answered() {
			continue
		}
		for j := range rules {
			if r := &rules[j]; r.Quota && r.applies(o) {
				if r.Durable {
					durable = append(durable, time.Duration(o.Recv-o.Send))
				} else {
					plain = append(plain, time.Duration(o.Recv-o.Send))
				}
				break
			}
		}
	}
	return quantile(plain, 0.5), quantile(plain, 0.99), quantile(durable, 0.5), quantile(durable, 0.99)
}

// quantile is the nearest-rank q-quantile of d (0 when d is empty).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	return d[min(len(d)-1, int(math.Ceil(q*float64(len(d))))-1)]
}
