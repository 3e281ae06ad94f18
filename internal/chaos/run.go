package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a harness run.
type Options struct {
	// Dir holds the run's files: logs of every process, each scenario's
	// history (<name>.history.jsonl) and events. It is kept.
	Dir string
	// Self is the executable re-run for the roles (see IsRole).
	Self string
	// Scenarios are run in order.
	Scenarios []Scenario
	// Log receives progress lines.
	Log io.Writer
}

// Run builds the harness's network and servers, runs every scenario and
// checks its history, and tears everything down, on failure too. A
// scenario that cannot run (a server that does not start) ends the run
// with an error; a scenario whose history breaks a bound is reported in
// its Result's Problems.
func Run(ctx context.Context, o Options) (results []Result, err error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	// Namespaces first: where they cannot be made (not root) the caller
	// skips, whatever else is missing.
	n, err := NewNet(ctx)
	if err != nil {
		return nil, err
	}
	defer n.Close()
	bins, err := FindBinaries(o.Self)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c := NewCluster(n, bins, o.Dir)
	defer c.Close()
	logf(o.Log, "network: %d hosts on %s, namespaces %s-*", len(hostAddrs), Subnet, n.run)
	if err := c.StartPostgres(ctx); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	for _, s := range o.Scenarios {
		if err := ctx.Err(); err != nil {
			return results, err
		}
		start := time.Now()
		logf(o.Log, "scenario %s: %s", s.Name, s.Fault)
		run := runScenario
		if s.Global != nil {
			run = runGlobal
		}
		res, err := run(ctx, c, s, o)
		if err != nil {
			return results, fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		results = append(results, res)
		if g := res.Global; g != nil {
			logf(o.Log, "scenario %s: done in %v: %d global decisions over %d windows, over limit %d/%d (%d straddling), stranded %d/%d, Regions %v, regional rule max %d, %d ledger calls, credits %d, %d problems",
				s.Name, time.Since(start).Round(time.Second), g.Decisions, g.Windows, g.Over, g.Bounds.Over, g.Ambiguous, g.Stranded, g.Bounds.Stranded,
				g.RegionStranded, g.RegionalMax, g.LedgerCalls, g.Credits, len(res.Problems))
			logf(o.Log, "  latency p50/p99 under the limit: global %v/%v, regional %v/%v; over it: global %v/%v, regional %v/%v",
				g.GP50, g.GP99, g.RP50, g.RP99, g.SatGP50, g.SatGP99, g.SatRP50, g.SatRP99)
		} else {
			logf(o.Log, "scenario %s: done in %v: %d decisions, %d fail-open, excess rate %d/%d quota %d/%d durable %d/%d, recovery %v, %d problems",
				s.Name, time.Since(start).Round(time.Second), res.Decisions, res.FailOpen, res.Rate.Max, res.Rate.Bound,
				res.Quota.Max, res.Quota.Bound, res.Durable.Max, res.Durable.Bound, res.Recovery.Round(time.Millisecond), len(res.Problems))
			logf(o.Log, "  quota latency p50/p99: default %v/%v, durable %v/%v; gap %v",
				res.QuotaP50.Round(10*time.Microsecond), res.QuotaP99.Round(10*time.Microsecond),
				res.DurableP50.Round(10*time.Microsecond), res.DurableP99.Round(10*time.Microsecond), res.Gap.Round(time.Millisecond))
		}
		for _, p := range res.Problems {
			logf(o.Log, "  problem: %s", p)
		}
	}
	return results, nil
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "%s chaos: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// run is one scenario's state.
type run struct {
	s   Scenario
	c   *Cluster
	nem *Nemesis
	api string

	mu     sync.Mutex
	events []Event
	pools  []PoolProbe // global scenarios: Region pools read during the fault
}

func (r *run) event(kind string) {
	r.mu.Lock()
	r.events = append(r.events, Event{Kind: kind, At: time.Now().UnixNano()})
	r.mu.Unlock()
}

// at is the time of the first event of kind, 0 when there is none.
func (r *run) at(kind string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == kind {
			return e.At
		}
	}
	return 0
}

func (r *run) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// watchPromotion records "promoted" when the Sentinels first name
// another primary than r1; stop ends the watch.
func (r *run) watchPromotion(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if m := r.c.SentinelMaster(ctx); m != "" && m != "r1" {
				r.event("promoted")
				return
			}
			r.sleep(ctx, 100*time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// The rules of every scenario, and the subjects that load them.
const (
	apiRate, apiBurst       = 20, 40 // every route, per subject, per second
	searchRate, searchBurst = 5, 5   // POST /search, changed during the fault to
	searchRate2             = 2      // 2 per second, burst 2
	billRate                = 5.0    // requests a second of each quota subject
)

// quotaShares place each quota subject's limit at a share of what it
// sends over the run, so that some run out before the fault, and some
// after it, where lost charges show as admissions beyond the limit.
var quotaShares = []float64{0.35, 0.55, 0.75, 0.9}

type ruleBody struct {
	API         string `json:"api"`
	Route       string `json:"route"`
	Subject     string `json:"subject"`
	Kind        string `json:"kind,omitempty"`
	Limit       int64  `json:"limit"`
	Period      string `json:"period"`
	Burst       *int64 `json:"burst,omitempty"`
	Anchor      string `json:"anchor,omitempty"`
	FailureMode string `json:"failure_mode,omitempty"`
	Durable     bool   `json:"durable,omitempty"`
	Global      bool   `json:"global,omitempty"`
}

// scenarioRules are the scenario's rules, named, with their bodies.
func scenarioRules(api string, load time.Duration, durable bool) ([]RuleSpec, []ruleBody) {
	anchor := time.Now().UTC().Add(-time.Hour).Truncate(time.Second).Format(time.RFC3339)
	specs := []RuleSpec{
		{Name: "api", Route: "*", Subject: "*", Versions: []Version{{Limit: apiRate, Burst: apiBurst, Period: time.Second}}},
		{Name: "search", Route: "POST /search", Subject: "*", Versions: []Version{{Limit: searchRate, Burst: searchBurst, Period: time.Second}}},
	}
	bodies := []ruleBody{
		{API: api, Route: "*", Subject: "*", Limit: apiRate, Period: "1s", Burst: new(int64(apiBurst))},
		{API: api, Route: "POST /search", Subject: "*", Limit: searchRate, Period: "1s", Burst: new(int64(searchBurst))},
	}
	kinds := []struct {
		prefix, route string
		durable       bool
	}{{"bill", "POST /bill", false}, {"billd", "POST /bill-durable", true}}
	if !durable {
		kinds = kinds[:1]
	}
	for _, k := range kinds {
		for i, share := range quotaShares {
			subj := k.prefix + "-" + strconv.Itoa(i+1)
			limit := int64(math.Floor(billRate * load.Seconds() * share))
			specs = append(specs, RuleSpec{Name: subj, Quota: true, Durable: k.durable, Route: k.route, Subject: subj,
				Versions: []Version{{Limit: limit, Period: 24 * time.Hour}}})
			bodies = append(bodies, ruleBody{API: api, Route: k.route, Subject: subj, Kind: "quota", Limit: limit, Period: "1d",
				Anchor: anchor, FailureMode: "closed", Durable: k.durable})
		}
	}
	return specs, bodies
}

// streams are the load: cold subjects (each request asks Redis), leased
// subjects (below their rate: served from token leases), hot subjects
// (above it), the changed rule's subjects, and the quota subjects.
func streams(durable bool) []Stream {
	var s []Stream
	for i := range 30 {
		s = append(s, Stream{Subject: "cold-" + strconv.Itoa(i+1), Route: "GET /items", Rate: 0.5})
	}
	for i := range 2 {
		s = append(s, Stream{Subject: "leased-" + strconv.Itoa(i+1), Route: "GET /items", Rate: 16})
		s = append(s, Stream{Subject: "hot-" + strconv.Itoa(i+1), Route: "GET /items", Rate: 30})
	}
	for i := range 3 {
		s = append(s, Stream{Subject: "search-" + strconv.Itoa(i+1), Route: "POST /search", Rate: 8})
	}
	for i := range quotaShares {
		s = append(s, Stream{Subject: "bill-" + strconv.Itoa(i+1), Route: "POST /bill", Rate: billRate})
		if durable {
			s = append(s, Stream{Subject: "billd-" + strconv.Itoa(i+1), Route: "POST /bill-durable", Rate: billRate})
		}
	}
	return s
}

func runScenario(ctx context.Context, c *Cluster, s Scenario, o Options) (Result, error) {
	r := &run{s: s, c: c, nem: NewNemesis(c), api: "chaos-" + s.Name}
	defer r.end()
	if err := c.StartRedis(ctx, s.Redis); err != nil {
		return Result{}, fmt.Errorf("redis: %w", err)
	}
	if err := c.StartDecide(ctx); err != nil {
		return Result{}, fmt.Errorf("decide: %w", err)
	}
	specs, bodies := scenarioRules(r.api, s.Load, s.Durable)
	ids, err := r.createRules(ctx, "d1", bodies)
	if err != nil {
		return Result{}, err
	}
	for i, id := range ids {
		specs[i].ID = id
	}
	if err := r.waitRules(ctx, decideHosts, "POST /search", specs[1].ID); err != nil {
		return Result{}, err
	}

	st := streams(s.Durable)
	total := 0.0
	for _, x := range st {
		total += x.Rate
	}
	var changeSent, changeAck int64
	ops, err := r.drive(ctx, o.Dir, decideHosts, st, int64(total*s.Load.Seconds()*1.1)+100, func(sctx context.Context, t0 time.Time) {
		r.sleep(sctx, time.Until(t0.Add(s.At+time.Second)))
		changed := bodies[1]
		changed.Limit, changed.Burst = searchRate2, new(int64(searchRate2))
		changeSent = time.Now().UnixNano()
		for sctx.Err() == nil && time.Since(t0) < s.Load-2*time.Second {
			if _, err := c.Admin(sctx, "d2", http.MethodPut, "/rules/"+specs[1].ID, changed, nil); err == nil {
				changeAck = time.Now().UnixNano()
				r.event("change")
				return
			}
			r.sleep(sctx, 250*time.Millisecond)
		}
	})
	if err != nil {
		return Result{}, err
	}

	heal := r.at("heal")
	fault := r.at("fault")
	for _, e := range r.events {
		logf(o.Log, "  %s at +%v", e.Kind, time.Duration(e.At-fault).Round(time.Millisecond))
	}
	var ch *Change
	if changeAck > 0 {
		ch = &Change{Rule: specs[1].ID, Q: searchRate2, Ready: max(changeAck, heal)}
		// The old numbers hold until the last decision that carried them;
		// the new ones from the write.
		lastOld := int64(0)
		for _, op := range ops {
			if q, ok := policyQ(op.Policy, ch.Rule); ok && q != ch.Q {
				lastOld = max(lastOld, op.Recv)
			}
		}
		specs[1].Versions[0].Until = lastOld
		specs[1].Versions = append(specs[1].Versions, Version{Limit: searchRate2, Burst: searchRate2, Period: time.Second, From: changeSent})
	}
	res := Check(s.Name, ops, specs, s.Bounds, heal, ch)
	res.Fault = s.Fault
	if changeAck == 0 {
		res.Problems = append(res.Problems, "the rule change was never acknowledged")
	}
	return res, nil
}

// end heals every fault the scenario made (then each of heal, with the
// same budget) and stops its decision processes and Redis.
func (r *run) end(heal ...func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = r.nem.Heal(ctx)
	for _, h := range heal {
		_ = h(ctx)
	}
	cancel()
	r.c.StopDecide()
	r.c.StopRedis()
}

// createRules creates the scenario's rules through host's admin API and
// returns their ids, in order.
func (r *run) createRules(ctx context.Context, host string, bodies []ruleBody) ([]string, error) {
	ids := make([]string, len(bodies))
	for i, b := range bodies {
		var created struct {
			ID string `json:"id"`
		}
		if _, err := r.c.Admin(ctx, host, http.MethodPost, "/rules", b, &created); err != nil {
			return nil, fmt.Errorf("create rule %s for %s: %w", b.Route, b.Subject, err)
		}
		ids[i] = created.ID
	}
	return ids, nil
}

// waitRules waits until every one of hosts serves the scenario's rules:
// rule id's policy in the answer to a probe of route (a probe subject of
// its own, which no checked budget counts).
func (r *run) waitRules(ctx context.Context, hosts []string, route, id string) error {
	for _, h := range hosts {
		err := poll(ctx, 20*time.Second, 100*time.Millisecond, nil, func() error {
			a, err := check(ctx, r.c.http, "http://"+hostAddr(r.c.Net.Host(h), decidePort)+"/check", CheckBody{Subject: "probe-" + h, API: r.api, Route: route})
			if err == nil && strings.Contains(a.Policy, id) {
				return nil
			}
			return fmt.Errorf("%s does not serve the scenario's rules: %v %v\n%s", h, a, err, r.c.Decide[h].Tail(2000))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// drive runs the load client on streams st sent to hosts for the
// scenario's Load (at most maxOps requests), injects the fault at its At
// and runs each of beside (given the load's start) alongside; all of them
// stop when the load ends. It keeps the history and the events in dir and
// returns the history.
func (r *run) drive(ctx context.Context, dir string, hosts []string, st []Stream, maxOps int64, beside ...func(ctx context.Context, t0 time.Time)) ([]Op, error) {
	var targets []Target
	for _, h := range hosts {
		targets = append(targets, Target{Host: h, URL: "http://" + hostAddr(r.c.Net.Host(h), decidePort) + "/check"})
	}
	hist := filepath.Join(dir, r.s.Name+".history.jsonl")
	lc := LoadConfig{Targets: targets, API: r.api, Streams: st, Duration: r.s.Load,
		MaxOps: maxOps, Timeout: 2 * time.Second, MaxInFlight: 512, Out: hist}
	cfgPath := filepath.Join(dir, r.s.Name+".load.json")
	b, _ := json.Marshal(lc)
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return nil, err
	}
	load, err := r.c.Procs.Start("load", r.s.Name+"-load", []string{roleVar + "=" + roleLoad, loadConfigVar + "=" + cfgPath}, r.c.bins.Self)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var injectErr error
	wg.Go(func() {
		r.sleep(sctx, time.Until(t0.Add(r.s.At)))
		if sctx.Err() == nil {
			injectErr = r.s.inject(sctx, r)
		}
	})
	for _, f := range beside {
		wg.Go(func() { f(sctx, t0) })
	}
	// The load client's run plus a minute at most; then the fault's
	// goroutines stop, and how the load and the fault ended is reported.
	var stopped error
	select {
	case <-load.Done():
	case <-time.After(r.s.Load + time.Minute):
		load.Kill()
		stopped = errors.New("the load client did not finish")
	case <-ctx.Done():
		stopped = ctx.Err()
	}
	cancel()
	wg.Wait()
	if stopped != nil {
		return nil, stopped
	}
	if err := injectErr; err != nil && !errors.Is(err, context.Canceled) {
		return nil, fmt.Errorf("fault: %w", err)
	}
	if err := load.Err(); err != nil {
		return nil, fmt.Errorf("load client: %w\n%s", err, load.Tail(2000))
	}
	ev, _ := json.Marshal(r.events)
	_ = os.WriteFile(filepath.Join(dir, r.s.Name+".events.json"), ev, 0o644)
	return ReadHistory(hist)
}

// Stop signals for the harness's executable: stop the run cleanly.
var Stop = []os.Signal{syscall.SIGINT, syscall.SIGTERM}
