// Package load is `sluice load`: it sends requests at a steady rate from
// many subjects and checks, per subject, that no more were admitted than
// the announced (or given) limit allows.
package load

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// HeaderList is a repeatable --header "Name: value" flag.
type HeaderList []string

func (h *HeaderList) String() string { return strings.Join(*h, ", ") }
func (h *HeaderList) Set(v string) error {
	name, _, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("%q: want \"Name: value\"", v)
	}
	*h = append(*h, v)
	return nil
}

// Config is what `sluice load` runs.
type Config struct {
	URL           string
	Method        string
	Rate          float64       // requests per second over all workers; 0 = as fast as possible
	Concurrency   int           // workers
	Duration      time.Duration // stop after this long
	Requests      int64         // stop after this many requests; 0 = no count bound
	Subjects      int           // subject k sends SubjectHeader: <SubjectPrefix><k>; 0 sends no subject
	SubjectHeader string
	SubjectPrefix string
	Headers       HeaderList
	Timeout       time.Duration // per request
	// Limit, Burst and Period override the RateLimit-Policy header in the
	// over-admission check; 0 means "from the header".
	Limit  int64
	Burst  int64
	Period time.Duration
}

// Check reports the first setting that cannot be run, naming its flag.
func (c *Config) Check() error {
	switch {
	case !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://"):
		return fmt.Errorf("%q is not an http(s) URL", c.URL)
	case c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("--rate must be >= 0")
	case c.Concurrency < 1 || c.Concurrency > 10000:
		return fmt.Errorf("--concurrency must be 1..10000")
	case c.Duration <= 0:
		return fmt.Errorf("--duration must be > 0")
	case c.Requests < 0:
		return fmt.Errorf("--requests must be >= 0")
	case c.Subjects < 0 || c.Subjects > 1_000_000:
		return fmt.Errorf("--subjects must be 0..1000000")
	case c.Limit < 0 || c.Burst < 0 || c.Period < 0:
		return fmt.Errorf("--limit, --burst and --period must be >= 0")
	case (c.Limit > 0) != (c.Period > 0):
		return fmt.Errorf("give --limit and --period together")
	}
	return nil
}

// IsTerminal reports whether w is a terminal, where progress redraws one
// line.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// policy is one limit a response announced: Limit tokens per Period with
// capacity Burst.
type policy struct {
	Limit  int64         `json:"limit"`
	Burst  int64         `json:"burst"`
	Period time.Duration `json:"-"`
}

// parseRateLimitPolicy reads a RateLimit-Policy header in the forms of the
// IETF drafts: `10;w=60`, `10;w=60;burst=20`, or structured fields such as
// `"api";q=100;w=60, "route";q=5;w=60`. Items without a quota or window are
// skipped.
func parseRateLimitPolicy(h string) []policy {
	var out []policy
	for item := range strings.SplitSeq(h, ",") {
		parts := strings.Split(strings.TrimSpace(item), ";")
		var p policy
		if n, err := strconv.ParseInt(strings.TrimSpace(parts[0]), 10, 64); err == nil {
			p.Limit = n
		} else {
			p.Limit = -1
		}
		for _, kv := range parts[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
			n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(v), `"`), 10, 64)
			if err != nil {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "q":
				p.Limit = n
			case "w":
				p.Period = time.Duration(n) * time.Second
			case "burst", "b":
				p.Burst = n
			}
		}
		if p.Limit < 0 || p.Period <= 0 {
			continue
		}
		if p.Burst <= 0 {
			p.Burst = p.Limit
		}
		out = append(out, p)
	}
	return out
}

// subjectStats is what one subject saw.
type subjectStats struct {
	mu          sync.Mutex
	allowed     int64
	denied      int64
	errors      int64
	first       time.Time // start of its first request
	lastAllowed time.Time // end of its last admitted response
	// policies are the distinct RateLimit-Policy values seen. A response
	// names only its limiting rule; with stacked rules (API-wide and
	// route) different responses name different ones, and all of them
	// bind the subject.
	policies map[string]struct{}
}

// started records a request begun at t0, and admitted one answered at t1,
// with s.mu held. The times are taken before the lock, so goroutines
// arrive out of order: the window keeps the earliest start and the latest
// admitted end, never whichever came last (which shrank the window and
// reported over-admission that was not there).
func (s *subjectStats) started(t0 time.Time) {
	if s.first.IsZero() || t0.Before(s.first) {
		s.first = t0
	}
}

func (s *subjectStats) admitted(t1 time.Time) {
	s.allowed++
	if t1.After(s.lastAllowed) {
		s.lastAllowed = t1
	}
}

// Report is the outcome of a run.
type Report struct {
	URL          string           `json:"url"`
	Elapsed      float64          `json:"elapsed_seconds"`
	Sent         int64            `json:"sent"`
	Allowed      int64            `json:"allowed"`
	Denied       int64            `json:"denied"`
	Errors       int64            `json:"errors"`
	Statuses     map[string]int64 `json:"statuses"`
	RatePerSec   float64          `json:"rate_per_second"`
	LatencyMs    latencyReport    `json:"latency_ms"`
	Subjects     []subjectReport  `json:"subjects"`
	OverAdmitted int              `json:"over_admitted"`
	Unchecked    int              `json:"unchecked"`
	FirstError   string           `json:"first_error,omitempty"`
}

type latencyReport struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type subjectReport struct {
	Subject  string  `json:"subject"`
	Allowed  int64   `json:"allowed"`
	Denied   int64   `json:"denied"`
	Errors   int64   `json:"errors"`
	Elapsed  float64 `json:"elapsed_seconds"`
	Limit    int64   `json:"limit,omitempty"`
	Burst    int64   `json:"burst,omitempty"`
	Period   string  `json:"period,omitempty"`
	Bound    float64 `json:"bound,omitempty"` // burst + limit*elapsed/period, the tightest policy
	Checked  bool    `json:"checked"`
	Over     bool    `json:"over_admitted"`
	Policies string  `json:"rate_limit_policy,omitempty"`
}

// Run runs c and returns the report. progress, when not nil, gets
// a live line (rewritten in place on a terminal, one line a second else).
func Run(ctx context.Context, c Config, progress io.Writer, tty bool) (*Report, error) {
	var extra http.Header = http.Header{}
	for _, h := range c.Headers {
		k, v, _ := strings.Cut(h, ":")
		extra.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	nsub := max(c.Subjects, 1)
	subs := make([]*subjectStats, nsub)
	for i := range subs {
		subs[i] = &subjectStats{policies: map[string]struct{}{}}
	}
	client := &http.Client{
		Timeout: c.Timeout,
		Transport: &http.Transport{
			MaxIdleConns:        c.Concurrency,
			MaxIdleConnsPerHost: c.Concurrency,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	defer client.CloseIdleConnections()

	// The deadline stops the dispatcher; requests in flight finish (within
	// their own timeout) so every admitted request is counted. Ctrl-C
	// cancels both.
	reqCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, c.Duration)
	defer cancel()

	var (
		sent, allowed, denied, errs atomic.Int64
		statusMu                    sync.Mutex
		statuses                    = map[string]int64{}
		firstErr                    atomic.Value
		latMu                       sync.Mutex
		latencies                   []time.Duration
	)
	jobs := make(chan int)
	start := time.Now()

	var wg sync.WaitGroup
	for range c.Concurrency {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				latMu.Lock()
				latencies = append(latencies, mine...)
				latMu.Unlock()
			}()
			for k := range jobs {
				s := subs[k]
				req, err := http.NewRequestWithContext(reqCtx, c.Method, c.URL, nil)
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					errs.Add(1)
					continue
				}
				req.Header = extra.Clone()
				if c.Subjects > 0 {
					req.Header.Set(c.SubjectHeader, c.SubjectPrefix+strconv.Itoa(k))
				}
				t0 := time.Now()
				s.mu.Lock()
				s.started(t0)
				s.mu.Unlock()
				resp, err := client.Do(req)
				if err != nil {
					if reqCtx.Err() != nil {
						// Interrupted while in flight: never answered, so it
						// counts nowhere.
						sent.Add(-1)
						continue
					}
					firstErr.CompareAndSwap(nil, err.Error())
					errs.Add(1)
					s.mu.Lock()
					s.errors++
					s.mu.Unlock()
					continue
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				t1 := time.Now()
				mine = append(mine, t1.Sub(t0))
				code := strconv.Itoa(resp.StatusCode)
				statusMu.Lock()
				statuses[code]++
				statusMu.Unlock()
				s.mu.Lock()
				if p := resp.Header.Get("RateLimit-Policy"); p != "" {
					if len(s.policies) < 16 {
						s.policies[p] = struct{}{}
					}
				}
				switch {
				case resp.StatusCode < 400:
					allowed.Add(1)
					s.admitted(t1)
				case resp.StatusCode == http.StatusTooManyRequests:
					denied.Add(1)
					s.denied++
				default:
					errs.Add(1)
					s.errors++
					firstErr.CompareAndSwap(nil, "HTTP "+code)
				}
				s.mu.Unlock()
			}
		})
	}

	stopProgress := startProgress(progress, tty, start, &sent, &allowed, &denied, &errs)

	// The dispatcher paces requests at c.Rate, handing subjects out round
	// robin; it stops at the deadline, at the count, or on Ctrl-C.
	go func() {
		defer close(jobs)
		var i int64
		for {
			if c.Requests > 0 && i >= c.Requests {
				return
			}
			if c.Rate > 0 {
				due := start.Add(time.Duration(float64(i) / c.Rate * float64(time.Second)))
				if d := time.Until(due); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-ctx.Done():
						t.Stop()
						return
					case <-t.C:
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case jobs <- int(i % int64(nsub)):
				sent.Add(1)
				i++
			}
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	stopProgress()

	rep := &Report{
		URL: c.URL, Elapsed: elapsed.Seconds(),
		Sent: sent.Load(), Allowed: allowed.Load(), Denied: denied.Load(), Errors: errs.Load(),
		Statuses: statuses,
	}
	if elapsed > 0 {
		rep.RatePerSec = float64(rep.Sent) / elapsed.Seconds()
	}
	if v, ok := firstErr.Load().(string); ok {
		rep.FirstError = v
	}
	rep.LatencyMs = percentiles(latencies)
	for k, s := range subs {
		name := "(none)"
		if c.Subjects > 0 {
			name = c.SubjectPrefix + strconv.Itoa(k)
		}
		rep.Subjects = append(rep.Subjects, checkSubject(name, s, c))
	}
	for _, s := range rep.Subjects {
		switch {
		case s.Over:
			rep.OverAdmitted++
		case !s.Checked && s.Allowed > 0:
			rep.Unchecked++
		}
	}
	return rep, nil
}

// checkSubject compares what a subject got with its rule: over any window
// of length T at most burst + limit*T/period requests get through. The
// window is from the start of its first request to the end of its last
// admitted one, which contains the server-side window, so the bound is
// never too tight.
func checkSubject(name string, s *subjectStats, c Config) subjectReport {
	seen := strings.Join(slices.Sorted(maps.Keys(s.policies)), ", ")
	r := subjectReport{Subject: name, Allowed: s.allowed, Denied: s.denied, Errors: s.errors, Policies: seen}
	if s.lastAllowed.IsZero() {
		r.Checked = true // nothing admitted: nothing over-admitted
		return r
	}
	window := s.lastAllowed.Sub(s.first)
	r.Elapsed = window.Seconds()
	var ps []policy
	if c.Limit > 0 {
		b := c.Burst
		if b == 0 {
			b = c.Limit
		}
		ps = []policy{{Limit: c.Limit, Burst: b, Period: c.Period}}
	} else {
		ps = parseRateLimitPolicy(seen)
		if c.Burst > 0 {
			for i := range ps {
				ps[i].Burst = c.Burst
			}
		}
	}
	if len(ps) == 0 {
		return r
	}
	r.Checked = true
	r.Bound = math.Inf(1)
	for _, p := range ps {
		b := float64(p.Burst) + float64(p.Limit)*window.Seconds()/p.Period.Seconds()
		if b < r.Bound {
			r.Bound, r.Limit, r.Burst, r.Period = b, p.Limit, p.Burst, rules.Period(p.Period).String()
		}
	}
	// A request admitted at the very edge may round up; the bound counts
	// whole tokens, so compare with its floor plus a hair for float error.
	r.Over = float64(r.Allowed) > math.Floor(r.Bound+1e-9)
	return r
}

func percentiles(ls []time.Duration) latencyReport {
	if len(ls) == 0 {
		return latencyReport{}
	}
	slices.Sort(ls)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(ls)))) - 1
		i = min(max(i, 0), len(ls)-1)
		return float64(ls[i].Microseconds()) / 1000
	}
	return latencyReport{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: float64(ls[len(ls)-1].Microseconds()) / 1000}
}

func startProgress(w io.Writer, tty bool, start time.Time, sent, allowed, denied, errs *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	every := time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	line := func() string {
		el := time.Since(start).Seconds()
		return fmt.Sprintf("%6.1fs  sent %d  allowed %d  denied %d  errors %d  %.0f req/s",
			el, sent.Load(), allowed.Load(), denied.Load(), errs.Load(), float64(sent.Load())/max(el, 1e-3))
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				if tty {
					fmt.Fprintf(w, "\r%s\033[K\n", line())
				}
				return
			case <-t.C:
				if tty {
					fmt.Fprintf(w, "\r%s\033[K", line())
				} else {
					fmt.Fprintln(w, line())
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Print writes the report as tables, for people.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%s: %d requests in %.2fs (%.1f/s)\n", r.URL, r.Sent, r.Elapsed, r.RatePerSec)
	fmt.Fprintf(w, "allowed %d  denied %d  errors %d", r.Allowed, r.Denied, r.Errors)
	if len(r.Statuses) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Statuses)) {
			parts = append(parts, fmt.Sprintf("%s×%d", k, r.Statuses[k]))
		}
		fmt.Fprintf(w, "  (status %s)", strings.Join(parts, " "))
	}
	fmt.Fprintln(w)
	if r.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", r.FirstError)
	}
	fmt.Fprintf(w, "latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n\n", r.LatencyMs.P50, r.LatencyMs.P90, r.LatencyMs.P99, r.LatencyMs.Max)

	const maxRows = 50
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tALLOWED\tDENIED\tERRORS\tWINDOW s\tLIMIT\tBURST\tPERIOD\tBOUND\tOK")
	shown := 0
	for _, s := range r.Subjects {
		// Over-admitted subjects are always listed; the rest up to maxRows.
		if shown >= maxRows && !s.Over {
			continue
		}
		shown++
		ok := "yes"
		switch {
		case s.Over:
			ok = "OVER"
		case !s.Checked:
			ok = "?"
		}
		bound, limit, burst, period := "-", "-", "-", "-"
		if s.Checked && s.Limit > 0 || s.Bound > 0 {
			bound = strconv.FormatFloat(s.Bound, 'f', 1, 64)
			limit, burst, period = strconv.FormatInt(s.Limit, 10), strconv.FormatInt(s.Burst, 10), s.Period
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\n", s.Subject, s.Allowed, s.Denied, s.Errors, s.Elapsed, limit, burst, period, bound, ok)
	}
	tw.Flush()
	if n := len(r.Subjects) - shown; n > 0 {
		fmt.Fprintf(w, "(%d more subjects, all within their bound; -o json lists every one)\n", n)
	}
	fmt.Fprintln(w)
	switch {
	case r.OverAdmitted > 0:
		fmt.Fprintf(w, "OVER-ADMISSION: %d subject(s) got more than burst + limit × window / period\n", r.OverAdmitted)
	case r.Unchecked > 0:
		fmt.Fprintf(w, "over-admission: none found; %d subject(s) unchecked (no RateLimit-Policy header: pass --limit and --period)\n", r.Unchecked)
	default:
		fmt.Fprintln(w, "over-admission: none")
	}
}

// Ensure the report marshals cleanly (no NaN/Inf in Bound).
func (s subjectReport) MarshalJSON() ([]byte, error) {
	type plain subjectReport
	if math.IsInf(s.Bound, 0) || math.IsNaN(s.Bound) {
		s.Bound = 0
	}
	return json.Marshal(plain(s))
}
