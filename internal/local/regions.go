package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
)

// `sluice local --regions N` runs N local "Regions" in one process, each
// as a Region of a deployment family is: its own listener, embedded Redis
// and decision path (app.NewLocal), deciding global rules from the pools
// it leases from one ledger, a DynamoDB table on dynalite. What the
// deployed Regions share, they share here: the rules (one memory store;
// an admin write through any Region is published to every Region's Redis
// snapshot before it answers, so each loads it at its next version
// check), the subject hash key and the ledger.

// MaxRegions is the most Regions `sluice local --regions` runs.
const MaxRegions = 5

// DefaultLedgerTable is the ledger table `sluice local --regions` creates
// when LEDGER_TABLE names none.
const DefaultLedgerTable = "sluice-local-ledger"

// GlobalDemoSubject is the API key of the global rule `sluice local
// --regions` seeds: a quota of GlobalDemoLimit a day over every Region.
const (
	GlobalDemoSubject = "demo-global"
	GlobalDemoLimit   = 10
)

// globalDemoRule is the global rule seeded beside the seed file.
func globalDemoRule(api string) rules.Rule {
	limit := int64(GlobalDemoLimit)
	return rules.Rule{
		API: api, Route: "*", Subject: GlobalDemoSubject,
		Kind: rules.Quota, Limit: &limit, Period: rules.Period(rules.Day), Global: true,
		Description: "sluice local --regions: one quota of 10 a day for demo-global, shared by every Region.",
	}
}

// regionName is the name of local Region i (0-based).
func regionName(i int) string { return "local-" + strconv.Itoa(i+1) }

// regionStack is one running Region.
type regionStack struct {
	name, base string
	app        *app.Local
	srv        *http.Server
	done       chan struct{} // closed once srv.Serve has returned
}

// serveRegions is serve for c.Regions Regions.
func serveRegions(ctx context.Context, c Config, cfg config.Config, stdout, stderr io.Writer) error {
	var st localStack
	defer st.close()
	if c.ln != nil {
		st.onClose(func() { c.ln.Close() })
	}
	if cfg.RedisURL != "" || cfg.DatabaseURL != "" {
		return fmt.Errorf("%w: --regions runs each Region on an embedded Redis of its own over an in-memory rules store: unset REDIS_URL and DATABASE_URL", ErrConfig)
	}

	endpoint, ledgerDesc := c.LedgerURL, "DynamoDB at "+config.Redact(c.LedgerURL)
	if endpoint == "" {
		var stop func()
		var err error
		if endpoint, stop, err = startDynalite(ctx, c.Dynalite, stderr); err != nil {
			return err
		}
		st.onClose(stop)
		ledgerDesc = "dynalite on " + endpoint + " (in memory; gone when sluice stops)"
	}
	table := cmp.Or(cfg.LedgerTable, DefaultLedgerTable)
	if err := createLedger(ctx, endpoint, table); err != nil {
		return err
	}
	cfg.LedgerTable, cfg.LedgerEndpoint = table, endpoint
	cfg.GlobalRegions = nil
	for i := range c.Regions {
		cfg.GlobalRegions = append(cfg.GlobalRegions, regionName(i))
	}
	ledgerDesc += ", table " + table

	rs := memory.NewWithOptions(store.Options{MaxRules: cfg.MaxRules})
	seedDesc, err := seed(ctx, rs, c)
	if err != nil {
		return err
	}
	if c.Seed != "" {
		r := globalDemoRule(c.API)
		r.Normalize()
		if _, err := rs.CreateRule(ctx, r, "seed"); err != nil && !errors.Is(err, rules.ErrConflict) {
			return fmt.Errorf("seed the global rule: %w", err)
		}
		seedDesc += ", and the global rule for " + GlobalDemoSubject
	}
	token, generated := adminToken(c.Token)

	var (
		mu      sync.Mutex
		regions []*regionStack
	)
	// An admin write through one Region reaches every Region's snapshot.
	publishAll := func(ctx context.Context) {
		mu.Lock()
		all := append([]*regionStack(nil), regions...)
		mu.Unlock()
		for _, r := range all {
			if _, err := r.app.PublishRules(context.WithoutCancel(ctx)); err != nil {
				r.app.Log.Error("publish the rules to this Region's Redis", slog.Any("error", err))
			}
		}
	}
	served := make(chan error, MaxRegions) // a Region's server that failed
	stopped := false
	defer func() {
		if stopped {
			return
		}
		for _, r := range regions { // an error before the end: stop serving
			r.srv.Close()
			<-r.done
		}
	}()
	firstPort := 0
	for i := range c.Regions {
		cfg := cfg
		cfg.Region = regionName(i)
		r, err := startRegion(ctx, c, cfg, i, &firstPort, rs, token, publishAll, served, &st, stderr)
		if r != nil {
			mu.Lock()
			regions = append(regions, r)
			mu.Unlock()
		}
		if err != nil {
			return fmt.Errorf("region %s: %w", regionName(i), err)
		}
	}

	bi := bannerInfo{
		base: regions[0].base, api: c.API, stage: c.Stage,
		redis: fmt.Sprintf("embedded: one miniredis per Region (%d)", c.Regions),
		store: "embedded (in memory, shared by every Region; gone when sluice stops)", seed: seedDesc, seedless: c.Seed == "",
		token: token, generated: generated, regions: regionsText(regions, ledgerDesc, c.Seed != ""),
		rulesKey: rulesync.FormatPublicKey(cfg.RulesPublicKey),
	}
	if err := bi.addDevToken(c.dev, cfg.SubjectSources); err != nil {
		return err
	}
	banner(stdout, bi)

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(stdout, "\nshutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	stopped = true
	for _, r := range regions {
		if err := r.srv.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("region %s: shutdown: %w", r.name, err))
		}
		<-r.done
	}
	return errors.Join(errs...)
}

// startRegion starts Region i: its listener (the first on c.Addr, the
// others on the next ports, or free ones when the first port was 0),
// embedded Redis and decision path over the shared store rs, serving
// once its routes are mounted.
func startRegion(ctx context.Context, c Config, cfg config.Config, i int, firstPort *int, rs store.Store, token string,
	publishAll func(context.Context), served chan<- error, st *localStack, stderr io.Writer) (*regionStack, error) {
	ln := c.ln
	if i > 0 || ln == nil {
		addr := c.Addr
		if i > 0 {
			host, _, _ := net.SplitHostPort(c.Addr)
			addr = net.JoinHostPort(host, "0")
			if *firstPort != 0 {
				addr = net.JoinHostPort(host, strconv.Itoa(*firstPort+i))
			}
		}
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
	}
	if i == 0 {
		if _, port, _ := net.SplitHostPort(c.Addr); port != "0" {
			*firstPort = ln.Addr().(*net.TCPAddr).Port
		}
	}
	mux := http.NewServeMux()
	if i == 0 {
		mountJWKS(mux, c.dev)
	}
	var mounted atomic.Bool
	r := &regionStack{name: regionName(i), base: "http://" + ln.Addr().String(), done: make(chan struct{})}
	r.srv = gatedServer(&mounted, mux, stderr)
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			served <- fmt.Errorf("region %s: serve: %w", r.name, err)
		}
	}()

	rdb, err := st.embeddedRedis(cfg.RedisPoolSize)
	if err != nil {
		return r, err
	}
	a, err := app.NewLocal(ctx, cfg, app.Options{
		Out: stderr, Function: "sluice-" + r.name, Prefix: cfg.RedisPrefix,
		Redis: rdb, Store: rs, Stats: stats.New(stats.Options{}),
	})
	if err != nil {
		return r, err
	}
	// On the way out, before the ledger stops (closed in reverse): Close
	// gives the leases' and the pools' tokens back, then the metrics are
	// flushed. Not a.Shutdown then a.Close, as serve does: a Limiter with
	// a ledger that never made a pool blocks in its second Close.
	st.onClose(func() {
		a.Close()
		a.Metrics.Flush()
	})
	r.app = a
	if _, err := a.PublishRules(ctx); err != nil {
		return r, fmt.Errorf("publish the rules to Redis: %w", err)
	}
	if err := mount(mux, c, cfg, a, token, publishAll, nil); err != nil {
		return r, err
	}
	mounted.Store(true)
	return r, nil
}

// regionsText is the banner's lines on the Regions: each one's URL, the
// ledger, and a loop that shows the global demo quota holding across
// them.
func regionsText(regions []*regionStack, ledgerDesc string, seeded bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  ledger     %s\n", ledgerDesc)
	var urls []string
	for _, r := range regions {
		fmt.Fprintf(&b, "  region %s  %s  (its own Redis; admin API %s/admin/, console %s/console/)\n", r.name, r.base, r.base, r.base)
		urls = append(urls, r.base)
	}
	if !seeded {
		return b.String()
	}
	fmt.Fprintf(&b, `
Global quota: %[1]s has %[2]d requests a day in all Regions together; this
loop sends %[3]d, round-robin: %[2]d get 200, the rest 429, whichever Region:
  for i in 1 2 3 4 5 6 7; do for u in %[4]s; do
    curl -s -o /dev/null -w "$u %%{http_code}\n" -H 'x-api-key: %[1]s' $u/hello; done; done
  sluice subjects limits %[1]s --api demo   # per Region: SLUICE_ENDPOINT=<region>/admin
`, GlobalDemoSubject, GlobalDemoLimit, 7*len(regions), strings.Join(urls, " "))
	return b.String()
}

// createLedger creates the ledger table at endpoint; one already there
// (a --ledger-url used before) is used as it is.
func createLedger(ctx context.Context, endpoint, table string) error {
	c, err := ledger.NewClient(ctx, endpoint, "us-east-1")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = ledger.CreateTable(ctx, c, table)
	var api interface{ ErrorCode() string }
	if errors.As(err, &api) && api.ErrorCode() == "ResourceInUseException" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger at %s: %w", endpoint, err)
	}
	return nil
}

// errNoDynalite says how to get dynalite when it is not found.
var errNoDynalite = errors.New("--regions needs a ledger: dynalite (npm) on Node.js, or a DynamoDB endpoint. " +
	"From the repository, run scripts/dynalite.sh (it installs dynalite into .cache/dynalite and prints the script to run; " +
	"`make run-global` does it for you), set SLUICE_DYNALITE to that script, or pass --ledger-url http://127.0.0.1:PORT")

// findDynalite returns node and the dynalite script to run: cli given
// (SLUICE_DYNALITE), else scripts/dynalite.sh's run.js in .cache/dynalite
// under the working directory (dynalite kept up when a client drops a
// request), else dynalite's own cli.js there; node from .cache/node
// (scripts/node.sh) or PATH.
func findDynalite(cli string) (node, script string, err error) {
	if cli == "" {
		cli = filepath.Join(".cache", "dynalite", "run.js")
		if _, err := os.Stat(cli); err != nil {
			cli = filepath.Join(".cache", "dynalite", "node_modules", "dynalite", "cli.js")
		}
	}
	if _, err := os.Stat(cli); err != nil {
		return "", "", fmt.Errorf("%w (dynalite not found: %v)", errNoDynalite, err)
	}
	if m, _ := filepath.Glob(filepath.Join(".cache", "node", "node_modules", "node-linux-*", "bin", "node")); len(m) > 0 {
		return m[0], cli, nil
	}
	if node, err = exec.LookPath("node"); err != nil {
		return "", "", fmt.Errorf("%w (node not found: %v)", errNoDynalite, err)
	}
	return node, cli, nil
}

// startDynalite starts dynalite, in memory, on a free port, and returns
// its URL once it answers, and stop, which ends it by its pid.
func startDynalite(ctx context.Context, cli string, stderr io.Writer) (endpoint string, stop func(), err error) {
	node, script, err := findDynalite(cli)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("find a port for dynalite: %w", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(node, script, "--host", "127.0.0.1", "--port", port,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start dynalite (%s %s): %w", node, script, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }() //nolint:errcheck // killed on purpose
	stop = func() {
		cmd.Process.Signal(os.Interrupt) //nolint:errcheck // gone already
		select {
		case <-exited:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill() //nolint:errcheck // gone already
			<-exited
		}
	}
	endpoint = "http://127.0.0.1:" + port
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.Close()
			return endpoint, stop, nil
		}
		select {
		case <-exited:
			return "", nil, fmt.Errorf("dynalite (%s %s) exited at start: see its output above", node, script)
		case <-ctx.Done():
			stop()
			return "", nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("dynalite on port %s did not answer within 30s", port)
		}
	}
}
