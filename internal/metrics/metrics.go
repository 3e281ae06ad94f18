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
	fs := []field{count("FailOpen", m.failOpen.Swap(0)), count("DenyCacheHits", m.cacheHits.Swap(0))}
	if n := min(m.nLat.Swap(0), latencySamples); n > 0 {
		fs = append(fs, field{"RedisLatency", "Milliseconds", func(b []byte) []byte {
			b = append(b, '[')
			for i := range n {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, math.Float64frombits(m.lat[i].Load()), 'f', 3, 64)
			}
			return append(b, ']')
		}})
	}
	if m.o.Gauges != nil {
		open, age := m.o.Gauges()
		var breaker uint64
		if open {
			breaker = 1
		}
		fs = append(fs, count("BreakerOpen", breaker), field{"SnapshotAgeSeconds", "Seconds", func(b []byte) []byte {
			return strconv.AppendInt(b, int64(age/time.Second), 10)
		}})
	}
	// Left out at zero, so the line is unchanged in the usual case; the
	// stack's alarm fills a missing minute with 0.
	if n := m.failClosed.Swap(0); n > 0 {
		fs = append(fs, count("FailClosed", n))
	}
	// Left out at zero too: a refused rules snapshot is a process holding
	// Redis writing rules, which the stack pages on.
	if m.o.RulesRefused != nil {
		total := m.o.RulesRefused()
		if refused := total - m.refused; refused > 0 {
			fs = append(fs, count("RulesRefused", refused))
		}
		m.refused = total
	}
	// Left out at zero too: most deployments have no concurrency rule.
	if n := m.inFlight.Swap(0); n > 0 {
		fs = append(fs, count("InFlightDenials", n))
	}
	if m.o.Leases != nil {
		lc := m.o.Leases()
		fs = append(fs, count("LeasedAdmissions", lc.Leased-m.leases.Leased), count("LeasesTaken", lc.Taken-m.leases.Taken),
			count("LeaseTokensReturned", lc.Returned-m.leases.Returned))
		m.leases = lc
	}
	decl := `[["Function"]],"Metrics":[`
	for i, f := range fs {
		if i > 0 {
			decl += ","
		}
		decl += `{"Name":"` + f.name + `","Unit":"` + f.unit + `"}`
	}
	b = m.head(b, ts, decl+`]}]}`)
	for _, f := range fs {
		b = append(b, `,"`+f.name+`":`...)
		b = f.value(b)
	}
	b = append(b, "}\n"...)
	m.buf = b
	_, _ = m.o.W.Write(b)
}

// field is one metric of a flush's line: its name, its unit, and what
// appends its value.
type field struct {
	name, unit string
	value      func([]byte) []byte
}

// count is the Count metric name of value n.
func count(name string, n uint64) field {
	return field{name, "Count", func(b []byte) []byte { return strconv.AppendUint(b, n, 10) }}
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
