// Package metrics aggregates decisions into CloudWatch Embedded Metric
// Format lines: JSON on a writer (a Lambda's stdout), which CloudWatch Logs
// turns into metrics. It needs no AWS SDK and knows nothing of Lambda.
package metrics

import (
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Namespace is the CloudWatch namespace of Sluice's metrics.
const Namespace = "Sluice"

// latencySamples is how many Redis latencies one flush reports, sampled
// uniformly from the interval: the most values an EMF metric array may hold.
const latencySamples = 100

// Options configure Metrics.
type Options struct {
	// W receives the EMF lines (os.Stdout in a Lambda, where CloudWatch
	// Logs turns them into metrics). Required.
	W io.Writer
	// Function is the value of the Function dimension (the Lambda's
	// name); default "sluice".
	Function string
	// Interval is the least time between two flushes: counts are summed in
	// memory and written by the first Record after it elapses; default
	// 10s. A negative Interval writes on every Record.
	Interval time.Duration
	// Gauges, when set, is called at every flush for the breaker state and
	// the rules snapshot's age.
	Gauges func() (breakerOpen bool, snapshotAge time.Duration)
	// Leases, when set, is called at every flush for the limiter's token
	// lease counters since it started; each line reports what they grew.
	Leases func() LeaseCounts
	// RulesRefused, when set, is called at every flush for the number of
	// rules versions and snapshots refused since start (not signed by the
	// rule writers, or from the future: rulesync.CacheStats.Refused); a
	// line reports its growth as RulesRefused when not zero.
	RulesRefused func() uint64
}

// LeaseCounts are the limiter's token lease counters (limiter.Stats),
// totals since it started.
type LeaseCounts struct {
	Leased   uint64 // decisions allowed from a lease, without a Redis call
	Taken    uint64 // leases taken
	Returned uint64 // unused leased tokens given back to Redis
}

// Metrics aggregates decisions into CloudWatch Embedded Metric Format lines
// in namespace Sluice: Decisions (dimension Outcome: allow, deny,
// shadowDeny, unauthorized), FailOpen, FailClosed and InFlightDenials
// (each only when not zero), DenyCacheHits, RedisLatency (ms,
// a uniform sample of up to 100 per flush), BreakerOpen (0 or 1),
// SnapshotAgeSeconds, RulesRefused (only when not zero), and with leasing
// LeasedAdmissions, LeasesTaken and LeaseTokensReturned.
// Recording costs a few atomic adds; a nil *Metrics records nothing.
type Metrics struct {
	o     Options
	epoch time.Time

	allow, deny, shadowDeny, unauthorized, failOpen, cacheHits atomic.Uint64
	failClosed, inFlight                                       atomic.Uint64
	nLat                                                       atomic.Uint64
	lat                                                        [latencySamples]atomic.Uint64 // float64 bits, ms
	next                                                       atomic.Int64                  // next flush, ns since epoch

	mu      sync.Mutex // serialises flushes
	buf     []byte
	leases  LeaseCounts // at the last flush
	refused uint64      // RulesRefused at the last flush
}

// New returns Metrics writing to o.W.
func New(o Options) *Metrics {
	if o.Function == "" {
		o.Function = "sluice"
	}
	if o.Interval == 0 {
		o.Interval = 10 * time.Second
	}
	m := &Metrics{o: o, epoch: time.Now()}
	m.next.Store(int64(max(o.Interval, 0)))
	return m
}

// Outcome is what Record reads of one decision (authorizer.Result's
// fields of the same names).
type Outcome struct {
	Allowed, ShadowDenied, FailOpen, Cached bool
	// InFlight: denied because a concurrency rule's slots were all held
	// (counted in the deny Decisions too).
	InFlight bool
	// LimiterTime is the limiter call's time; 0 when there was none.
	LimiterTime time.Duration
}

// Record counts one decision and flushes when the interval has elapsed.
func (m *Metrics) Record(r Outcome) {
	if m == nil {
		return
	}
	switch {
	case !r.Allowed:
		m.deny.Add(1)
	case r.ShadowDenied:
		m.shadowDeny.Add(1)
	default:
		m.allow.Add(1)
	}
	if r.FailOpen {
		m.failOpen.Add(1)
	}
	if r.Cached {
		m.cacheHits.Add(1)
	}
	if r.InFlight && !r.Allowed {
		m.inFlight.Add(1)
	}
	if r.LimiterTime > 0 {
		// A reservoir sample (Vitter's algorithm R): every call of the
		// interval has the same chance to be among the latencies reported,
		// not just the first ones, so CloudWatch's percentiles describe the
		// whole interval.
		v := math.Float64bits(float64(r.LimiterTime) / float64(time.Millisecond))
		i := m.nLat.Add(1) - 1
		if i >= latencySamples {
			i = rand.Uint64N(i + 1)
		}
		if i < latencySamples {
			m.lat[i].Store(v)
		}
	}
	m.maybeFlush()
}

// FailClosed counts a decision denied because Redis failed and the rule
// fails closed (the error that Decide returns with a Deny). It is written
// as FailClosed (namespace Sluice, dimension Function) on the flush's line
// when not zero: a Redis outage on failure_mode closed rules is otherwise
// only more 429s, which no alarm can tell from callers over their limits.
func (m *Metrics) FailClosed() {
	if m == nil {
		return
	}
	m.failClosed.Add(1)
}

// Unauthorized counts a request rejected for having no subject.
func (m *Metrics) Unauthorized() {
	if m == nil {
		return
	}
	m.unauthorized.Add(1)
	m.maybeFlush()
}

func (m *Metrics) maybeFlush() {
	if int64(time.Since(m.epoch)) >= m.next.Load() && m.mu.TryLock() {
		defer m.mu.Unlock()
		m.flushLocked()
	}
}

// Flush writes what was recorded since the last flush now.
func (m *Metrics) Flush() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushLocked()
}

func (m *Metrics) flushLocked() {
	m.next.Store(int64(time.Since(m.epoch) + max(m.o.Interval, 0)))
	ts := time.Now().UnixMilli()
	b := m.buf[:0]
	for _, o := range [...]struct {
		name string
		n    *atomic.Uint64
	}{{"allow", &m.allow}, {"deny", &m.deny}, {"shadowDeny", &m.shadowDeny}, {"unauthorized", &m.unauthorized}} {
		n := o.n.Swap(0)
		if n == 0 {
			continue
		}
		b = m.head(b, ts, `[["Function","Outcome"]],"Metrics":[{"Name":"Decisions","Unit":"Count"}]}]}`)
		b = append(b, `,"Outcome":"`...)
		b = append(b, o.name...)
		b = append(b, `","Decisions":`...)
		b = strconv.AppendUint(b, n, 10)
		b = append(b, "}\n"...)
	}

	// Every metric declared must be present at the root, so the
	// declaration lists only those this line carries.
	n := min(m.nLat.Swap(0), latencySamples)
	var open bool
	var age time.Duration
	if m.o.Gauges != nil {
		open, age = m.o.Gauges()
	}
	decl := `[["Function"]],"Metrics":[{"Name":"FailOpen","Unit":"Count"},{"Name":"DenyCacheHits","Unit":"Count"}`
	if n > 0 {
		decl += `,{"Name":"RedisLatency","Unit":"Milliseconds"}`
	}
	if m.o.Gauges != nil {
		decl += `,{"Name":"BreakerOpen","Unit":"Count"},{"Name":"SnapshotAgeSeconds","Unit":"Seconds"}`
	}
	// Left out at zero, so the line is unchanged in the usual case; the
	// stack's alarm fills a missing minute with 0.
	failClosed := m.failClosed.Swap(0)
	if failClosed > 0 {
		decl += `,{"Name":"FailClosed","Unit":"Count"}`
	}
	// Left out at zero too: a refused rules snapshot is a process holding
	// Redis writing rules, which the stack pages on.
	var refused uint64
	if m.o.RulesRefused != nil {
		total := m.o.RulesRefused()
		refused, m.refused = total-m.refused, total
	}
	if refused > 0 {
		decl += `,{"Name":"RulesRefused","Unit":"Count"}`
	}
	// Left out at zero too: most deployments have no concurrency rule.
	inFlight := m.inFlight.Swap(0)
	if inFlight > 0 {
		decl += `,{"Name":"InFlightDenials","Unit":"Count"}`
	}
	var lc LeaseCounts
	if m.o.Leases != nil {
		decl += `,{"Name":"LeasedAdmissions","Unit":"Count"},{"Name":"LeasesTaken","Unit":"Count"},{"Name":"LeaseTokensReturned","Unit":"Count"}`
		lc = m.o.Leases()
	}
	b = m.head(b, ts, decl+`]}]}`)
	b = append(b, `,"FailOpen":`...)
	b = strconv.AppendUint(b, m.failOpen.Swap(0), 10)
	b = append(b, `,"DenyCacheHits":`...)
	b = strconv.AppendUint(b, m.cacheHits.Swap(0), 10)
	if failClosed > 0 {
		b = append(b, `,"FailClosed":`...)
		b = strconv.AppendUint(b, failClosed, 10)
	}
	if refused > 0 {
		b = append(b, `,"RulesRefused":`...)
		b = strconv.AppendUint(b, refused, 10)
	}
	if inFlight > 0 {
		b = append(b, `,"InFlightDenials":`...)
		b = strconv.AppendUint(b, inFlight, 10)
	}
	if n > 0 {
		b = append(b, `,"RedisLatency":[`...)
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, math.Float64frombits(m.lat[i].Load()), 'f', 3, 64)
		}
		b = append(b, ']')
	}
	if m.o.Gauges != nil {
		b = append(b, `,"BreakerOpen":`...)
		if open {
			b = append(b, '1')
		} else {
			b = append(b, '0')
		}
		b = append(b, `,"SnapshotAgeSeconds":`...)
		b = strconv.AppendInt(b, int64(age/time.Second), 10)
	}
	if m.o.Leases != nil {
		b = append(b, `,"LeasedAdmissions":`...)
		b = strconv.AppendUint(b, lc.Leased-m.leases.Leased, 10)
		b = append(b, `,"LeasesTaken":`...)
		b = strconv.AppendUint(b, lc.Taken-m.leases.Taken, 10)
		b = append(b, `,"LeaseTokensReturned":`...)
		b = strconv.AppendUint(b, lc.Returned-m.leases.Returned, 10)
		m.leases = lc
	}
	b = append(b, "}\n"...)
	m.buf = b
	_, _ = m.o.W.Write(b)
}

// head starts one EMF line up to the dimension sets and metrics, then the
// Function property.
func (m *Metrics) head(b []byte, ts int64, dimsAndMetrics string) []byte {
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":"`+Namespace+`","Dimensions":`...)
	b = append(b, dimsAndMetrics...)
	b = append(b, `,"Function":`...)
	return strconv.AppendQuote(b, m.o.Function)
}
