package app_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The request every load decision makes: one API-wide and one route rule
// apply (see twoRules), so each decision is a two-bucket script call.
const (
	loadAPI      = "fo1a2b3c4d"
	loadMethod   = "GET"
	loadResource = "/orders/{id}"
)

// outcome is how a decision under load was made.
type outcome uint8

const (
	byRedis    outcome = iota // Redis answered: allowed or denied by the buckets
	byCache                   // denied by the local deny cache, no Redis call
	failedOpen                // Redis failed or the breaker was open; allowed
	failed                    // any other error (fail-closed, no subject …)
)

func (o outcome) String() string {
	return [...]string{"redis", "cache", "fail-open", "error"}[o]
}

// sample is one decision under load.
type sample struct {
	end     time.Duration // since the load started
	took    time.Duration // the Decide call
	subject int           // index in the load's subjects; -1 for a fresh one
	allowed bool
	out     outcome
}

// load is N goroutines deciding continuously, each recording every
// decision with its latency and outcome. Every other decision charges one
// of a set of subjects, round robin, which the rules soon limit (the
// over-admission check counts them); the others charge a fresh subject
// each, which always reaches Redis: a heartbeat whose gaps are Redis's,
// not the deny cache's.
type load struct {
	start    time.Time
	subjects []string
	stop     atomic.Bool
	wg       sync.WaitGroup
	per      [][]sample   // one slice per worker
	byRedis  atomic.Int64 // decisions answered by Redis so far, for awaitByRedis

	mu   sync.Mutex
	errs []string // the Redis errors seen, for failure messages
}

// startLoad starts workers goroutines deciding through a (the authorizer's
// Decider, as the Lambda handler calls it), pausing pace between two
// decisions of a worker.
func startLoad(t *testing.T, a *app.Decider, workers int, subjects []string, pace time.Duration) *load {
	t.Helper()
	l := &load{start: time.Now(), subjects: subjects, per: make([][]sample, workers)}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			out := make([]sample, 0, 4096)
			fresh := "fresh-" + strconv.Itoa(w) + "-" + strconv.FormatInt(l.start.UnixNano(), 36) + "-"
			for i := w; !l.stop.Load(); i++ {
				s, key := -1, fresh+strconv.Itoa(i)
				if i%2 == 0 {
					s = (i / 2) % len(subjects)
					key = subjects[s]
				}
				req := &authorizer.Request{API: loadAPI, Method: loadMethod, Resource: loadResource,
					Headers: map[string]string{"x-api-key": key}}
				begin := time.Now()
				res, err := a.Core.Decide(context.Background(), req)
				end := time.Now()
				smp := sample{end: end.Sub(l.start), took: end.Sub(begin), subject: s, allowed: res.Allowed}
				switch {
				case res.FailOpen:
					smp.out = failedOpen
				case err != nil:
					smp.out = failed
				case res.Cached:
					smp.out = byCache
				}
				if err != nil && !errors.Is(err, limiter.ErrBreakerOpen) {
					l.noteError(smp.end, err)
				}
				if smp.out == byRedis {
					l.byRedis.Add(1)
				}
				out = append(out, smp)
				time.Sleep(pace) // sleep: the load's request rate against the real Redis, not a wait for anything
			}
			l.per[w] = out
		}()
	}
	return l
}

// awaitByRedis waits until n more decisions of the load have been
// answered by Redis: the load's steady state before a fault, its flow
// through one, or its tail after recovery, counted in decisions rather
// than in time so that a slow machine stretches the phase instead of
// thinning it. The test fails, naming when, if they do not come within
// 20s.
func (l *load) awaitByRedis(t *testing.T, n int64, when string) {
	t.Helper()
	from := l.byRedis.Load()
	testenv.Await(t, 20*time.Second, 5*time.Millisecond, fmt.Sprintf("%d decisions answered by Redis %s", n, when),
		func() bool { return l.byRedis.Load() >= from+n })
}

// noteError records an error of the load (all of them up to 200).
func (l *load) noteError(at time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) < 200 {
		l.errs = append(l.errs, fmt.Sprintf("%v: %v", at.Round(time.Millisecond), err))
	}
}

// errors returns the errors recorded so far (breaker-open ones aside).
func (l *load) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

// since is the time since the load started.
func (l *load) since() time.Duration { return time.Since(l.start) }

// finish stops the workers and returns every decision, by end time.
func (l *load) finish() *loadReport {
	l.stop.Store(true)
	l.wg.Wait()
	r := &loadReport{subjects: len(l.subjects), length: l.since()}
	for _, p := range l.per {
		r.samples = append(r.samples, p...)
	}
	slices.SortFunc(r.samples, func(a, b sample) int { return int(a.end - b.end) })
	return r
}

// loadReport is what a load saw.
type loadReport struct {
	samples  []sample
	subjects int
	length   time.Duration
}

// window returns the decisions that ended in [from, to).
func (r *loadReport) window(from, to time.Duration) []sample {
	var out []sample
	for _, s := range r.samples {
		if s.end >= from && s.end < to {
			out = append(out, s)
		}
	}
	return out
}

// count is the number of decisions with outcome o.
func count(ss []sample, o outcome) int {
	n := 0
	for _, s := range ss {
		if s.out == o {
			n++
		}
	}
	return n
}

// gap is the longest stretch of the load with no decision answered by
// Redis, counting from the load's start and to its end.
func (r *loadReport) gap() (gap, at time.Duration) {
	last := time.Duration(0)
	for _, s := range r.samples {
		if s.out != byRedis {
			continue
		}
		if d := s.end - last; d > gap {
			gap, at = d, last
		}
		last = s.end
	}
	if d := r.length - last; d > gap {
		gap, at = d, last
	}
	return gap, at
}

// firstByRedis is the end of the first decision answered by Redis at or
// after from; the load's length when there is none.
func (r *loadReport) firstByRedis(from time.Duration) time.Duration {
	for _, s := range r.samples {
		if s.end >= from && s.out == byRedis {
			return s.end
		}
	}
	return r.length
}

// admitted is, per subject, the decisions Redis allowed (fail-open ones are
// counted apart: they are the failure mode, not the buckets).
func (r *loadReport) admitted() []int {
	n := make([]int, r.subjects)
	for _, s := range r.samples {
		if s.out == byRedis && s.allowed && s.subject >= 0 {
			n[s.subject]++
		}
	}
	return n
}

// quantile is the q-quantile (0..1) of the latencies of ss.
func quantile(ss []sample, q float64) time.Duration {
	if len(ss) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(ss))
	for i, s := range ss {
		ds[i] = s.took
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(i, 0)]
}

// summary is one line for the test log.
func summary(ss []sample) string {
	return fmt.Sprintf("%d decisions: %d by Redis (%d allowed), %d cached, %d fail-open, %d errors; p50 %v p99 %v max %v",
		len(ss), count(ss, byRedis), countAllowed(ss), count(ss, byCache), count(ss, failedOpen), count(ss, failed),
		quantile(ss, 0.5).Round(time.Microsecond), quantile(ss, 0.99).Round(time.Microsecond), quantile(ss, 1).Round(time.Microsecond))
}

func countAllowed(ss []sample) int {
	n := 0
	for _, s := range ss {
		if s.out == byRedis && s.allowed {
			n++
		}
	}
	return n
}

// checkAdmission fails the test when a subject got more decisions allowed
// by Redis than the route rule's burst + rate × elapsed, elapsed being the
// Redis TIME bracket [t0, t1] around the whole load.
func checkAdmission(t *testing.T, r *loadReport, burst, rate int64, t0, t1 time.Time) {
	t.Helper()
	most := float64(burst) + float64(rate)*t1.Sub(t0).Seconds()
	worst := 0
	for i, n := range r.admitted() {
		worst = max(worst, n)
		if float64(n) > most {
			t.Errorf("subject %d: admitted %d > burst + rate×elapsed = %.1f (%v by Redis TIME): over-admitted", i, n, most, t1.Sub(t0))
		}
	}
	t.Logf("admission: at most %d per subject, bound burst + rate×elapsed = %.1f over %v (Redis TIME)", worst, most, t1.Sub(t0).Round(time.Millisecond))
}
