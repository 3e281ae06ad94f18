package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// The multi-Region topology of the global scenarios: three Regions, each
// a Redis and two decision processes on hosts of their own, and the ledger
// host. Region i reaches the ledger over a link of rtt (the delayer on the
// ledger host holds its answers that long); inside a Region there is no
// added delay. The rules store (PostgreSQL) is the harness's one: every
// Region reads the same rules, as a declarative apply per Region gives.
type region struct {
	name   string   // g1..g3
	redis  string   // its Redis host
	decide []string // its decision hosts
	rtt    time.Duration
	aws    string // the Region name in GLOBAL_REGIONS
}

var regions = []region{
	{"g1", "g1r", []string{"g1d1", "g1d2"}, 20 * time.Millisecond, "us-east-1"},
	{"g2", "g2r", []string{"g2d1", "g2d2"}, 50 * time.Millisecond, "eu-west-1"},
	{"g3", "g3r", []string{"g3d1", "g3d2"}, 80 * time.Millisecond, "ap-southeast-2"},
}

// The global rule of the scenarios and the regional rule beside it with
// the same numbers: a limit (GlobalBounds.Limit) a gPeriod, the shortest
// period a global rate rule takes. Each is loaded at gRate a second in
// all, more than the limit's rate, so that the ledger's budget is what
// binds.
const (
	gPeriod = time.Minute
	gRate   = 120.0
)

// gBlock is the most a block of a limit holds: limit/(2·Regions).
func gBlock(limit int64) int64 { return limit / (2 * int64(len(regions))) }

// gOpen is a cut-off fail-open Region's allowance a window: OpenShare
// (default 1/Regions) of the limit, rounded up.
func gOpen(limit int64) int64 { return (limit + int64(len(regions)) - 1) / int64(len(regions)) }

// GlobalBounds are what a global scenario promises, written down before
// it runs from the limiter's stated bounds (internal/limiter/global.go).
type GlobalBounds struct {
	// Limit is the global rule's limit a gPeriod.
	Limit int64
	// Over is the most the Regions together may admit beyond the limit in
	// one window.
	Over int64
	// Stranded is the most ledger used − admitted from the ledger may be
	// in one window (tokens leased and never spent); -1 when none is
	// stated. A take that timed out may still have been applied, its
	// tokens lost to the window (internal/ledger): the checker adds a
	// block for each ledger call that failed.
	Stranded int64
	// PoolMax is the most tokens one pool of the faulty Region may hold
	// when the scenario reads its Redis (PoolProbe); -1: not read.
	PoolMax int64
	// FailOpen makes the global rule fail open (else closed).
	FailOpen bool
	// Traffic is how the load spreads: "even", "skewed" (90 % to g1) or
	// "drain" (g3's moves to g1 and g2 at the fault).
	Traffic string
}

// GlobalResult is the checker's verdict on a global scenario.
type GlobalResult struct {
	// Windows are the ledger windows the run touched.
	Windows int
	// Over is the most any window admitted beyond the limit, counting
	// only decisions wholly inside it (a lower bound); Ambiguous is the
	// most decisions of one window that straddled its edge.
	Over, Ambiguous int64
	// Stranded is the most ledger used − admitted of one window.
	Stranded int64
	// RegionStranded is each Region's taken + credited − given −
	// admitted (answers not fail-open) over the run (its processes' counters at exit): what its
	// pools held at window ends, or lost (a failover), or never gave back.
	RegionStranded []int64
	// Pools are the faulty Region's pools as the scenario read them.
	Pools []PoolProbe
	// RegionalMax is the most the regional rule with the same numbers
	// admitted in one window, all Regions together.
	RegionalMax int64
	// LedgerCalls are the proxies' requests; Decisions the global rule's
	// over both its subjects.
	LedgerCalls, Decisions int64
	// Credits are tokens put in pools from the fail-open allowance;
	// FailOpen the global rule's fail-open answers (failOpen: true), not
	// counted as spent from a pool.
	Credits, FailOpen int64
	// LedgerErrors are the ledger calls that failed; each may have lost a
	// block (Bounds.Stranded).
	LedgerErrors int64
	// Global and regional rule latencies (send to answer), p50 and p99,
	// of the subjects under their limit, and (Sat) of those over it.
	GP50, GP99, RP50, RP99             time.Duration
	SatGP50, SatGP99, SatRP50, SatRP99 time.Duration
	Bounds                             GlobalBounds
}

// The routes of the global rule and the regional one: each is loaded
// twice, a subject at gRate a second (over its limit: the checked one) on
// globalRoute and regionalRoute, and one at lowRate a second (under it:
// the latency a Region sees while its pool refills ahead of need) on
// globalLow and regionalLow. The rules' subject is "*": each subject has
// its own budget.
const (
	globalRoute   = "GET /g"
	regionalRoute = "GET /r"
	globalLow     = "GET /gl"
	regionalLow   = "GET /rl"
	lowRate       = 30.0
)

// globalScenarios are the global scenarios with a limit of limit a
// minute, load for load, the fault at at for d. The bounds follow from
// the limiter's: no over-admission while every Region reaches the
// ledger; a cut-off fail-open Region admits at most its allowance; each
// Region's pool holds at most a block, so tokens leased and unspent in a
// window are at most Regions blocks.
func globalScenarios(limit int64, load, at, d time.Duration) []Scenario {
	block := gBlock(limit)
	steady := GlobalBounds{Limit: limit, Over: 0, Stranded: int64(len(regions)) * block, PoolMax: -1, Traffic: "even"}
	with := func(f func(*GlobalBounds)) *GlobalBounds { b := steady; f(&b); return &b }
	return []Scenario{
		{Name: "global-steady", Fault: "3 Regions, even load, no fault", Load: load, At: at, Global: with(func(*GlobalBounds) {}),
			inject: func(context.Context, *run) error { return nil }},
		{Name: "global-skewed", Fault: "3 Regions, 90 % of the load in g1", Load: load, At: at,
			Global: with(func(b *GlobalBounds) { b.Traffic = "skewed" }), inject: func(context.Context, *run) error { return nil }},
		{Name: "global-cut-closed", Fault: fmt.Sprintf("g1 cut from the ledger %v, fail-closed", d), Load: load, At: at,
			Global: with(func(*GlobalBounds) {}), inject: cutRegion(0, d)},
		{Name: "global-cut-open", Fault: fmt.Sprintf("g1 cut from the ledger %v, fail-open", d), Load: load, At: at,
			Global: with(func(b *GlobalBounds) { b.FailOpen, b.Over = true, gOpen(limit) }), inject: cutRegion(0, d)},
		{Name: "global-slow", Fault: fmt.Sprintf("ledger slow %v (p50 30 ms, p99 500 ms)", d), Load: load, At: at,
			Global: with(func(b *GlobalBounds) { b.Stranded = -1 }),
			inject: ledgerFault(LedgerFault{P50: 30 * time.Millisecond, P99: 500 * time.Millisecond}, d)},
		{Name: "global-conflicts", Fault: fmt.Sprintf("30 %% of ledger writes conflict %v", d), Load: load, At: at,
			Global: with(func(*GlobalBounds) {}), inject: ledgerFault(LedgerFault{Conflict: 0.3}, d)},
		{Name: "global-failover", Fault: "g1's Redis killed and restarted empty, pool held", Load: load, At: at,
			// The pool's tokens die with Redis: one block more may strand,
			// as no pool holds more than a block.
			Global: with(func(b *GlobalBounds) { b.Stranded += block; b.PoolMax = block }), inject: restartRedis(0, 2*time.Second)},
		{Name: "global-drain", Fault: "g3's traffic moved to g1 and g2", Load: load, At: at,
			// A Region whose traffic leaves strands at most one block
			// until the idle return (GlobalIdle 10 s), then none.
			Global: with(func(b *GlobalBounds) { b.Traffic, b.PoolMax = "drain", block }),
			inject: drain(2)},
		{Name: "global-shutdown", Fault: "g3's processes stopped (SIGTERM), leases out", Load: load, At: at,
			// Every pool goes back at Close.
			Global: with(func(b *GlobalBounds) { b.PoolMax = 0 }), inject: stopRegion(2)},
	}
}

// cutRegion drops every packet between Region i's decision hosts and the
// ledger host for d.
func cutRegion(i int, d time.Duration) func(context.Context, *run) error {
	return networkFault(d, func(ctx context.Context, n *Nemesis) error {
		for _, h := range regions[i].decide {
			if err := n.Partition(ctx, h, "led"); err != nil {
				return err
			}
		}
		return nil
	})
}

// ledgerFault sets f on the ledger's proxies for d.
func ledgerFault(f LedgerFault, d time.Duration) func(context.Context, *run) error {
	return faultFor(d, false, func(ctx context.Context, r *run) error { return r.c.ledgerFault(ctx, f) },
		func(ctx context.Context, r *run) error {
			return r.c.ledgerFault(context.WithoutCancel(ctx), LedgerFault{})
		})
}

// restartRedis kills Region i's Redis (its pools die with it) and starts
// it again, empty, after down.
func restartRedis(i int, down time.Duration) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		if err := r.probe(ctx, i, "before the kill"); err != nil {
			return err
		}
		r.c.Redis[regions[i].redis].Kill()
		r.event("fault")
		r.sleep(ctx, down)
		err := r.c.startRegionRedis(ctx, regions[i])
		r.event("heal")
		return err
	}
}

// stopRegion stops Region i's decision processes with SIGTERM.
func stopRegion(i int) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		r.event("fault")
		var wg sync.WaitGroup
		for _, h := range regions[i].decide {
			if p := r.c.Decide[h]; p != nil {
				wg.Go(func() { p.Stop(syscall.SIGTERM, 10*time.Second) })
			}
		}
		wg.Wait()
		r.event("heal")
		return r.probe(ctx, i, "after the SIGTERM")
	}
}

// drain moves Region i's traffic away at the fault (the streams do) and
// reads its pools 2 s later, and again after the idle return
// (GlobalIdle, 10 s, checked every half of it).
func drain(i int) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		r.event("fault")
		r.sleep(ctx, 2*time.Second)
		if err := r.probe(ctx, i, "2 s after the drain"); err != nil {
			return err
		}
		r.sleep(ctx, 16*time.Second)
		r.event("heal")
		return r.probe(ctx, i, "18 s after the drain")
	}
}

// repoRoot is the module's root, found upward from the working directory
// (make chaos runs at the root, go test in the package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "dynalite.sh")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no scripts/dynalite.sh above the working directory")
		}
		dir = up
	}
}

// scriptOut runs one of the repository's scripts and returns what it
// printed (a path).
func scriptOut(ctx context.Context, root, name string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", name))
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/%s: %w: %s", name, err, bytes.TrimSpace(errb.Bytes()))
	}
	return strings.TrimSpace(out.String()), nil
}

// StartLedger starts dynalite (Node 22 from scripts/node.sh, dynalite
// from scripts/dynalite.sh) on the ledger host's loopback and the ledger
// role beside it, and waits for the role's control API.
func (c *Cluster) StartLedger(ctx context.Context) error {
	if c.Ledger != nil {
		return nil
	}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	node, err := scriptOut(ctx, root, "node.sh")
	if err != nil {
		return err
	}
	dyn, err := scriptOut(ctx, root, "dynalite.sh")
	if err != nil {
		return err
	}
	dir := filepath.Join(c.dir, "dynalite")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if _, err := c.Procs.Start("led", "led-dynalite", nil, filepath.Join(node, "node"), dyn, "--host", "127.0.0.1",
		"--port", strconv.Itoa(dynalitePort), "--path", dir, "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"); err != nil {
		return err
	}
	l, err := c.Procs.Start("led", "led-ledger", []string{roleVar + "=" + roleLedger, ledgerAddrVar + "=" + c.Net.Host("led").IP}, c.bins.Self)
	if err != nil {
		return err
	}
	c.Ledger = l
	return c.waitTCP(ctx, hostAddr(c.Net.Host("led"), ledgerPort), l, 60*time.Second)
}

// ledgerCall sends one request to the ledger role's control API and
// decodes its answer into out (when not nil).
func (c *Cluster) ledgerCall(ctx context.Context, method, path string, body, out any) error {
	cl := *c.http
	cl.Timeout = 30 * time.Second
	_, err := c.call(ctx, &cl, method, "http://"+hostAddr(c.Net.Host("led"), ledgerPort)+path, body, out)
	return err
}

func (c *Cluster) ledgerFault(ctx context.Context, f LedgerFault) error {
	return c.ledgerCall(ctx, http.MethodPost, "/fault", f, nil)
}

// startRegionRedis starts Region g's Redis, empty.
func (c *Cluster) startRegionRedis(ctx context.Context, g region) error {
	p, err := c.startRedisServer(g.redis, "redis", redisPort)
	if err != nil {
		return err
	}
	c.Redis[g.redis] = p
	return c.waitRedis(ctx, hostAddr(c.Net.Host(g.redis), redisPort), p, "PONG", "PING")
}

// spawnGlobalDecide starts decision process h of Region i (not waiting
// for it): its Region's Redis, the shared store, and the ledger through
// its Region's proxy; its counters go to dir at exit.
func (c *Cluster) spawnGlobalDecide(i int, h, dir string, migrate bool) error {
	g, names := regions[i], []string{}
	for _, r := range regions {
		names = append(names, r.aws)
	}
	return c.spawnDecide(h, migrate, map[string]string{
		"REDIS_MODE":      "single",
		"REDIS_URL":       "redis://" + hostAddr(c.Net.Host(g.redis), redisPort) + "/0",
		"LEDGER_TABLE":    ledgerTable,
		"LEDGER_ENDPOINT": "http://" + hostAddr(c.Net.Host("led"), ledgerPort+i+1),
		"GLOBAL_REGIONS":  strings.Join(names, ","),
		decideStatsVar:    filepath.Join(dir, h+".stats.json"),
	})
}

// globalStreams are the load of a global scenario: on each route one
// subject, spread over the Regions as b.Traffic says.
func globalStreams(b GlobalBounds, at time.Duration) []Stream {
	var s []Stream
	for _, route := range []string{globalRoute, regionalRoute, globalLow, regionalLow} {
		subj, total := "s"+strings.TrimPrefix(route, "GET /"), gRate
		if route == globalLow || route == regionalLow {
			total = lowRate
		}
		for i, g := range regions {
			rate := total / 3
			switch b.Traffic {
			case "skewed":
				rate = total * 0.05
				if i == 0 {
					rate = total * 0.9
				}
			case "drain":
				if i == 2 {
					s = append(s, Stream{Subject: subj, Route: route, Rate: rate, Hosts: g.decide, Until: at})
					s = append(s, Stream{Subject: subj, Route: route, Rate: rate / 2, Hosts: regions[0].decide, From: at})
					s = append(s, Stream{Subject: subj, Route: route, Rate: rate / 2, Hosts: regions[1].decide, From: at})
					continue
				}
			}
			s = append(s, Stream{Subject: subj, Route: route, Rate: rate, Hosts: g.decide})
		}
	}
	return s
}

// runGlobal runs one scenario on the multi-Region topology.
func runGlobal(ctx context.Context, c *Cluster, s Scenario, o Options) (Result, error) {
	r := &run{s: s, c: c, nem: NewNemesis(c), api: "chaos-" + s.Name}
	lat := NewNemesis(c)
	dir := filepath.Join(o.Dir, s.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, err
	}
	defer r.end(lat.Heal, func(ctx context.Context) error { return c.ledgerFault(ctx, LedgerFault{}) })
	if err := c.StartLedger(ctx); err != nil {
		return Result{}, fmt.Errorf("ledger: %w", err)
	}
	if err := c.ledgerCall(ctx, http.MethodPost, "/reset", nil, nil); err != nil {
		return Result{}, err
	}
	if err := c.ledgerFault(ctx, LedgerFault{}); err != nil {
		return Result{}, err
	}
	var hosts []string
	for _, g := range regions {
		if err := c.startRegionRedis(ctx, g); err != nil {
			return Result{}, fmt.Errorf("redis %s: %w", g.name, err)
		}
		// Between each Region and the ledger, the Region's round trip.
		if err := lat.Delay(ctx, "led", g.rtt, g.decide...); err != nil {
			return Result{}, err
		}
		hosts = append(hosts, g.decide...)
	}
	if err := c.spawnGlobalDecide(0, "g1d1", dir, true); err != nil {
		return Result{}, err
	}
	if err := c.waitHealthy(ctx, "g1d1", 60*time.Second); err != nil {
		return Result{}, err
	}
	mode := "closed"
	if s.Global.FailOpen {
		mode = "open"
	}
	var bodies []ruleBody
	for _, route := range []string{regionalRoute, globalRoute, regionalLow, globalLow} {
		bodies = append(bodies, ruleBody{API: r.api, Route: route, Subject: "*", Limit: s.Global.Limit, Period: "1m",
			FailureMode: mode, Global: route == globalRoute || route == globalLow})
	}
	ids, err := r.createRules(ctx, "g1d1", bodies)
	if err != nil {
		return Result{}, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		if h == "g1d1" {
			continue
		}
		if err := c.spawnGlobalDecide(i/2, h, dir, false); err != nil {
			return Result{}, err
		}
	}
	for i, h := range hosts {
		wg.Go(func() { errs[i] = c.waitHealthy(ctx, h, 60*time.Second) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	// Every host serves both rules (the regional one's policy in a probe
	// of its route: no probe touches the global budget).
	if err := r.waitRules(ctx, hosts, regionalRoute, ids[0]); err != nil {
		return Result{}, err
	}

	ops, err := r.drive(ctx, o.Dir, hosts, globalStreams(*s.Global, s.At), int64(2*(gRate+lowRate)*s.Load.Seconds()*1.2)+100)
	if err != nil {
		return Result{}, err
	}
	var proxies []struct{ Requests int64 }
	if err := c.ledgerCall(ctx, http.MethodGet, "/stats", nil, &proxies); err != nil {
		return Result{}, err
	}
	// Stop the processes (pools go back), then read their counters and
	// the ledger.
	c.StopDecide()
	var items []LedgerItem
	if err := c.ledgerCall(ctx, http.MethodGet, "/items", nil, &items); err != nil {
		return Result{}, err
	}
	stats := map[string]globalStats{}
	for _, h := range hosts {
		var st globalStats
		if b, err := os.ReadFile(filepath.Join(dir, h+".stats.json")); err == nil {
			_ = json.Unmarshal(b, &st)
		}
		stats[h] = st
	}
	saved, _ := json.Marshal(map[string]any{"items": items, "proxies": proxies})
	_ = os.WriteFile(filepath.Join(dir, "ledger.json"), saved, 0o644)
	var calls int64
	for _, p := range proxies {
		calls += p.Requests
	}
	// The checked subject's items: those of the global rule on globalRoute.
	key := rules.GlobalKey(rules.Rule{API: r.api, Route: globalRoute, Subject: "*"}) + "#"
	checked := slices.DeleteFunc(items, func(it LedgerItem) bool { return !strings.HasPrefix(it.Key, key) })
	res := CheckGlobal(s.Name, ops, checked, stats, calls, *s.Global)
	res.Global.Pools = r.pools
	for _, pr := range r.pools {
		if bound := s.Global.poolBound(pr); bound >= 0 && pr.Max > bound {
			res.Problems = append(res.Problems, fmt.Sprintf("%s %s: a pool held %d tokens (%d in all), bound %d", pr.Region, pr.When, pr.Max, pr.Sum, bound))
		}
	}
	res.Fault = s.Fault
	return res, nil
}

// poolBound is the most one pool may hold when p was read: PoolMax, or
// none after the idle return, when every pool has been given back.
func (b GlobalBounds) poolBound(p PoolProbe) int64 {
	if p.When == "18 s after the drain" {
		return 0
	}
	return b.PoolMax
}

// PoolProbe is what one read of a Region's Redis found in the pools of
// the current ledger window: their sum and the fullest.
type PoolProbe struct {
	When     string // "before the kill", "2 s after the drain", ...
	Region   string
	Sum, Max int64
}

// readPools reads every pool of Region g's Redis whose window is the
// current one (the keys end in ":g<window start, Unix ms>").
func (c *Cluster) readPools(ctx context.Context, g region, when string) (PoolProbe, error) {
	pr := PoolProbe{When: when, Region: g.name}
	rc := c.redisClient(hostAddr(c.Net.Host(g.redis), redisPort))
	defer rc.Close()
	suffix := ":g" + strconv.FormatInt(time.Now().UnixMilli()/gPeriod.Milliseconds()*gPeriod.Milliseconds(), 10)
	iter := rc.Scan(ctx, 0, "*"+suffix, 1000).Iterator()
	for iter.Next(ctx) {
		n, err := rc.Get(ctx, iter.Val()).Int64()
		if err != nil {
			continue // gone since the scan
		}
		pr.Sum += n
		pr.Max = max(pr.Max, n)
	}
	return pr, iter.Err()
}

// probe reads Region i's pools into r's record.
func (r *run) probe(ctx context.Context, i int, when string) error {
	pr, err := r.c.readPools(ctx, regions[i], when)
	if err != nil {
		return fmt.Errorf("read %s's pools: %w", regions[i].name, err)
	}
	r.mu.Lock()
	r.pools = append(r.pools, pr)
	r.mu.Unlock()
	return nil
}

// globalStats are the counters a decision process writes at exit
// (limiter.GlobalStats).
type globalStats struct {
	Taken, Given, Stranded, Credits, LedgerErrors int64
}

// CheckGlobal computes a global scenario's verdict: per ledger window
// (the items' keys end in the window's start, Unix ms), the global rule's
// admissions against the limit and against the ledger's used count; each
// Region's stranded tokens; the regional rule's admissions beside; the
// latencies and ledger calls.
func CheckGlobal(scenario string, ops []Op, items []LedgerItem, stats map[string]globalStats, calls int64, b GlobalBounds) Result {
	res := Result{Scenario: scenario, Propagation: -1}
	g := &GlobalResult{Bounds: b, LedgerCalls: calls, RegionStranded: make([]int64, len(regions))}
	res.Global = g
	p := int64(gPeriod)
	type win struct{ certain, straddle, mid, regional int64 }
	wins := map[int64]*win{}
	at := func(k int64) *win {
		if wins[k] == nil {
			wins[k] = &win{}
		}
		return wins[k]
	}
	regionOf := func(h string) int {
		return slices.IndexFunc(regions, func(g region) bool { return slices.Contains(g.decide, h) })
	}
	block := gBlock(b.Limit)
	for i, rg := range regions {
		for _, h := range rg.decide {
			st := stats[h]
			g.Credits += st.Credits
			g.LedgerErrors += st.LedgerErrors
			// A pool takes tokens from the ledger and, cut off, from the
			// fail-open allowance (credits); admissions from it answer
			// without failOpen, and come off below.
			g.RegionStranded[i] += st.Taken + st.Credits - st.Given
		}
	}
	var gl, rl, glo, rlo []time.Duration
	for i := range ops {
		o := &ops[i]
		if !res.count(o) {
			continue
		}
		lat := time.Duration(o.Recv - o.Send)
		switch o.Route {
		case regionalLow:
			rlo = append(rlo, lat)
			continue
		case globalLow:
			glo = append(glo, lat)
			g.Decisions++
			if o.Allowed && !o.FailOpen {
				if r := regionOf(o.Host); r >= 0 {
					g.RegionStranded[r]-- // admitted from the ledger
				}
			}
			continue
		}
		if o.Route == regionalRoute {
			rl = append(rl, lat)
			if o.Allowed && !strings.HasPrefix(o.Subject, "probe-") {
				at((o.Send+o.Recv)/2/p).regional++
			}
			continue
		}
		gl = append(gl, lat)
		g.Decisions++
		if !o.Allowed {
			continue
		}
		if o.FailOpen {
			// A Region's Redis failed (a timeout under load): the rule's
			// failure mode answered, as for any rule, outside the ledger
			// and its bounds; the table counts these apart.
			g.FailOpen++
			continue
		}
		if r := regionOf(o.Host); r >= 0 {
			g.RegionStranded[r]--
		}
		ws, wr := o.Send/p, o.Recv/p
		at((o.Send+o.Recv)/2/p).mid++
		if ws == wr {
			at(ws).certain++
		} else {
			at(ws).straddle++
			at(wr).straddle++
		}
	}
	used := map[int64]int64{}
	for _, it := range items {
		// The item names its window "#<start ms>-<end ms>".
		i := strings.LastIndexByte(it.Key, '#')
		start, _, _ := strings.Cut(it.Key[i+1:], "-")
		ms, err := strconv.ParseInt(start, 10, 64)
		if i < 0 || err != nil {
			res.Problems = append(res.Problems, "ledger item with no window: "+it.Key)
			continue
		}
		k := ms * int64(time.Millisecond) / p
		used[k] += it.Used
		at(k)
	}
	keys := slices.Sorted(maps.Keys(wins))
	g.Windows = len(keys)
	for _, k := range keys {
		w := wins[k]
		g.Over = max(g.Over, w.certain-b.Limit)
		g.Ambiguous = max(g.Ambiguous, w.straddle)
		g.Stranded = max(g.Stranded, used[k]-w.mid)
		g.RegionalMax = max(g.RegionalMax, w.regional)
		if w.certain-b.Limit > b.Over {
			res.Problems = append(res.Problems, fmt.Sprintf("window %s admitted %d, limit %d, bound %d over",
				time.Unix(0, k*p).UTC().Format("15:04:05"), w.certain, b.Limit, b.Over))
		}
		if bound := b.Stranded + block*g.LedgerErrors; b.Stranded >= 0 && used[k]-w.mid > bound {
			res.Problems = append(res.Problems, fmt.Sprintf("window %s: ledger used %d, admitted from it %d: %d stranded, bound %d + %d ledger errors × %d",
				time.Unix(0, k*p).UTC().Format("15:04:05"), used[k], w.mid, used[k]-w.mid, b.Stranded, g.LedgerErrors, block))
		}
	}
	g.GP50, g.GP99 = quantile(glo, 0.5), quantile(glo, 0.99)
	g.RP50, g.RP99 = quantile(rlo, 0.5), quantile(rlo, 0.99)
	g.SatGP50, g.SatGP99 = quantile(gl, 0.5), quantile(gl, 0.99)
	g.SatRP50, g.SatRP99 = quantile(rl, 0.5), quantile(rl, 0.99)
	return res
}

// WriteGlobalTable writes the global scenarios' table: per fault, each
// bound against what was measured.
func WriteGlobalTable(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| fault | decisions | fail-open answers · allowance credits | over limit / window (measured / bound) | stranded / window (measured / bound) | Region stranded (g1 · g2 · g3) | faulty Region's fullest pool (measured / bound) | regional rule, max / window | ledger calls / decision | latency p50 · p99: global vs regional | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		g := r.Global
		if g == nil {
			continue
		}
		sb := "none stated"
		if g.Bounds.Stranded >= 0 {
			sb = strconv.FormatInt(g.Bounds.Stranded, 10)
			if g.LedgerErrors > 0 {
				sb += fmt.Sprintf(" + %d×%d", g.LedgerErrors, gBlock(g.Bounds.Limit))
			}
		}
		rs := make([]string, len(g.RegionStranded))
		for i, v := range g.RegionStranded {
			rs[i] = strconv.FormatInt(v, 10)
		}
		pools := "—"
		if len(g.Pools) > 0 {
			var ps []string
			for _, p := range g.Pools {
				ps = append(ps, fmt.Sprintf("%s: %d / %d", p.When, p.Max, g.Bounds.poolBound(p)))
			}
			pools = strings.Join(ps, "; ")
		}
		per := 0.0
		if g.Decisions > 0 {
			per = float64(g.LedgerCalls) / float64(g.Decisions)
		}
		fmt.Fprintf(w, "| %s | %d | %d · %d | %d / %d | %d / %s | %s | %s | %d (limit %d) | %.4f | %s · %s vs %s · %s | %s |\n",
			r.Fault, g.Decisions, g.FailOpen, g.Credits, max(g.Over, 0), g.Bounds.Over, g.Stranded, sb, strings.Join(rs, " · "), pools, g.RegionalMax, g.Bounds.Limit,
			per, fine(g.GP50), fine(g.GP99), fine(g.RP50), fine(g.RP99), verdict(r))
	}
}

// fine formats a latency in milliseconds to a hundredth.
func fine(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
