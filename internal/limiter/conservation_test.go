package limiter

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgerproxy"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestConservation is the model-based checker of global budgets
// (docs/global.md#conservation). Each run drives 2 or 3 Regions, each a
// key prefix on the test Redis reached through a fault proxy and one or
// two Limiter processes, over one ledger table on dynalite reached through
// a ledgerproxy, through a random sequence of: decisions of random cost,
// usage charges and refunds, idle drains, process shutdowns, admin reads,
// resets, window roll-overs, rule edits (limit, period, anchor), and
// faults armed at either side: a write dropped before it applies, a write
// applied whose answer is lost, a conflict, a cut. After every step it
// checks, against a model built only from what the calls answered:
//
//   - per ledger item, ledger used - every Region's pool - tokens spent is
//     at least 0 (no token was made) and at most what the Limiters
//     counted stranded (none was lost silently);
//   - spent never passes the largest limit the item was taken under;
//   - a Region's fail-open admissions stay within its allowance;
//   - an admin read writes nothing, and its Remaining is limit - used +
//     the Region's pool.
//
// make test runs CHECK_RUNS runs (default 12) of CHECK_STEPS steps
// (default 60); make check-global runs more. A failure prints rapid's
// seed and the shrunk sequence: rerun it with -rapid.seed. Each
// invariant fails with a message of its own, its numbers logged apart,
// so that rapid shrinks a sequence however its numbers vary.
func TestConservation(t *testing.T) {
	endpoint := testenv.DynamoDBURL(t)
	url := testenv.RedisURL(t)
	_, table := ledgertest.Table(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	direct := testenv.Client(t, url, nil)
	ddb := ledgertest.Client(t, endpoint)
	// Three Region slots, each with its Redis and ledger proxies, reused
	// by every run (a run's keys and subject are its own).
	var slots [3]*slot
	for i := range slots {
		slots[i] = newSlot(t, opt.Addr, endpoint, table)
	}
	steps := envInt("CHECK_STEPS", 60)
	runs := envInt("CHECK_RUNS", 12)
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		// Not given on the command line: CHECK_RUNS, or what fits make test.
		_ = f.Value.Set(strconv.Itoa(runs))
	}
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		c := newChecker(t, rt, slots[:rapid.IntRange(2, 3).Draw(rt, "regions")], direct, ddb, table, run)
		defer c.close()
		for range rapid.IntRange(steps/2, steps).Draw(rt, "steps") {
			c.step(rt)
			c.check(rt)
		}
	})
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// slot is one Region's reach: a TCP proxy to Redis that can drop a
// command or lose its reply, and a ledgerproxy.
type slot struct {
	redis  *faultProxy
	ledger *ledgerproxy.Proxy
	table  *ledger.Table
}

func newSlot(t *testing.T, redisAddr, endpoint, table string) *slot {
	fp := newFaultProxy(t, redisAddr)
	lp, err := ledgerproxy.New(ledgerproxy.Options{Target: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(lp)
	t.Cleanup(srv.Close)
	lt := ledger.New(ledgertest.Client(t, srv.URL), ledger.Options{Table: table, Timeout: 150 * time.Millisecond})
	return &slot{redis: fp, ledger: lp, table: lt}
}

// faultProxy forwards TCP to Redis; armed, it drops the next chunk a
// client writes (not applied) or forwards it and drops the reply
// (applied), then holds that connection silent, so the client times out
// (a timeout is never retried by go-redis; a broken connection is).
// While cut it refuses connections.
type faultProxy struct {
	addr string
	next atomic.Int32 // 1 drop, 2 lose the reply
	skip atomic.Int32 // commands to let through before next applies
	cut  atomic.Bool
	mu   sync.Mutex
	open map[net.Conn]bool
}

const (
	dropCmd  = 1
	loseRepl = 2
)

func newFaultProxy(t *testing.T, target string) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{addr: ln.Addr().String(), open: map[net.Conn]bool{}}
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.cut.Load() {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.track(c, s)
			go p.serve(c, s)
		}
	}()
	return p
}

func (p *faultProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.open[c] = true
	}
}

func (p *faultProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.open {
		c.Close()
		delete(p.open, c)
	}
}

// arm makes the command after the next skip ones fail with fault: a
// decision's script, the lock and reads before a fill, the fill, its
// resolve, the unlock.
func (p *faultProxy) arm(fault, skip int) {
	p.skip.Store(int32(skip))
	p.next.Store(int32(fault))
}

// setCut cuts the Region from its Redis (every connection closed, new
// ones refused) or restores it.
func (p *faultProxy) setCut(cut bool) {
	p.cut.Store(cut)
	if cut {
		p.closeAll()
	}
}

func (p *faultProxy) serve(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	var silent atomic.Bool // the connection's faulted: nothing more goes through
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := s.Read(buf)
			if err != nil {
				c.Close()
				return
			}
			if silent.Load() {
				continue
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if silent.Load() {
			continue
		}
		fault := int32(0)
		if p.next.Load() != 0 && p.skip.Add(-1) < 0 {
			fault = p.next.Swap(0)
		}
		switch fault {
		case dropCmd:
			silent.Store(true)
			continue
		case loseRepl:
			silent.Store(true)
		}
		if _, err := s.Write(buf[:n]); err != nil {
			return
		}
	}
}

// proc is one Limiter process of a Region.
type proc struct {
	l *Limiter
}

// region is one Region of a run.
type region struct {
	slot   *slot
	prefix string
	rdb    *redis.Client
	procs  []*proc
	closed []*Limiter // shut down: their stranded counts still count
	// credit is what the Region admitted on its allowance, per window.
	credit map[string]int64
	// charged is what its usage charged and did not refund, per window.
	charged map[string]int64
}

// account is the model of one ledger item (one window of the rule).
type account struct {
	spent    int64 // tokens spent from pools, net of refunds, since the last reset
	maxLimit int64
	base     int64 // used - pools at the last reset, minus the stranded then
	reset    bool
	start    time.Time
	end      time.Time
	b        Bucket
}

type checker struct {
	t       *testing.T
	regions []*region
	subject string
	b       Bucket
	now     time.Time // the Limiters' clock for ledger windows
	items   map[string]*account
	direct  *redis.Client
	ddb     *dynamodb.Client
	table   string
	usageN  int
}

func newChecker(t *testing.T, rt *rapid.T, slots []*slot, direct *redis.Client, ddb *dynamodb.Client, table string, run int) *checker {
	c := &checker{
		t: t, direct: direct, ddb: ddb, table: table, items: map[string]*account{},
		subject: fmt.Sprintf("tenant-%s-%d", testenv.Random(t), run),
		// In the future, so that every window's keys expire after the run.
		now: time.Date(2027, 1, 4, 10, 0, 0, 0, time.UTC),
		b: Bucket{
			ID: "g", Limit: int64(rapid.IntRange(20, 400).Draw(rt, "limit")), Period: 24 * time.Hour,
			Window: Daily, Global: "rule", FailClosed: rapid.Bool().Draw(rt, "failClosed"),
		},
	}
	for i, s := range slots {
		s.redis.next.Store(0)
		s.redis.setCut(false)
		s.ledger.FailNext(0)
		s.ledger.SetDown(false)
		r := &region{slot: s, prefix: fmt.Sprintf("cons:%s:%d:%d:", testenv.Random(t), run, i), credit: map[string]int64{}, charged: map[string]int64{}}
		r.rdb = redis.NewClient(&redis.Options{Addr: s.redis.addr, Protocol: 2, ContextTimeoutEnabled: true, MaxRetries: 1, PoolSize: 8})
		c.regions = append(c.regions, r)
	}
	// Started once every Region is there: each process's Regions count
	// sizes its blocks and allowance.
	for i, r := range c.regions {
		for range rapid.IntRange(1, 2).Draw(rt, "procs") {
			c.start(r, i)
		}
	}
	return c
}

// start starts a process in Region r.
func (c *checker) start(r *region, i int) {
	l := New(r.rdb, Options{
		Prefix: r.prefix, Timeout: 80 * time.Millisecond, DenyCacheSize: -1, BreakerThreshold: -1,
		Ledger: r.slot.table, Regions: len(c.regions), Region: "r" + strconv.Itoa(i),
		LedgerTimeout: 150 * time.Millisecond,
		// No idle sweep behind the checker's back: drains are its steps.
		GlobalIdle: 1000 * time.Hour,
	})
	l.global.clock = func() time.Time { return c.now }
	r.procs = append(r.procs, &proc{l: l})
}

func (c *checker) close() {
	for _, r := range c.regions {
		for _, p := range r.procs {
			_ = p.l.Close(context.Background())
		}
		_ = r.rdb.Close()
		testenv.DeleteKeys(c.t, c.direct, r.prefix)
	}
}

// account returns the model of b's item at the checker's clock.
func (c *checker) account() (*account, string) {
	start, end := GlobalWindow(c.b, c.now)
	k := c.b.Global + strconv.FormatInt(start.UnixMilli(), 10) + "-" + strconv.FormatInt(end.UnixMilli(), 10)
	a := c.items[k]
	if a == nil {
		a = &account{start: start, end: end, b: c.b}
		c.items[k] = a
	}
	a.maxLimit = max(a.maxLimit, c.b.Limit)
	return a, k
}

// quiet waits for every background refill of every process.
func (c *checker) quiet() {
	for _, r := range c.regions {
		for _, p := range r.procs {
			p.l.global.bg.Wait()
		}
	}
}

func (c *checker) pick(rt *rapid.T) (*region, *proc, int) {
	i := rapid.IntRange(0, len(c.regions)-1).Draw(rt, "region")
	r := c.regions[i]
	return r, r.procs[rapid.IntRange(0, len(r.procs)-1).Draw(rt, "proc")], i
}

func (c *checker) step(rt *rapid.T) {
	ctx := context.Background()
	r, p, ri := c.pick(rt)
	switch op := rapid.SampledFrom([]string{
		"decide", "decide", "decide", "decide", "burst", "usage", "refund", "drain", "shutdown",
		"read", "reset", "rollover", "edit", "fault", "fault", "heal",
	}).Draw(rt, "op"); op {
	case "decide", "burst":
		n := 1
		if op == "burst" {
			n = rapid.IntRange(5, 60).Draw(rt, "n")
		}
		cost := int64(rapid.IntRange(1, 5).Draw(rt, "cost"))
		a, k := c.account()
		for range n {
			d, err := p.l.Allow(ctx, Request{Subject: c.subject, Buckets: []Bucket{c.b}, Cost: cost})
			switch {
			case !d.Allowed:
			case !d.FailOpen:
				a.spent += cost
			case errors.Is(err, ErrLedger):
				r.credit[k] += cost // on the allowance
			default:
				// Redis failed open: nothing was charged anywhere (or, its
				// answer lost, the pool was: counted stranded).
			}
		}
	case "usage", "refund":
		cost := int64(rapid.IntRange(1, 8).Draw(rt, "units"))
		if op == "refund" {
			cost = -cost
		}
		a, k := c.account()
		c.usageN++
		key := "u" + strconv.Itoa(c.usageN)
		// A client whose report failed sends it again with its key until
		// it is answered: then it counted exactly once.
		var err error
		for range 20 {
			if _, err = p.l.Charge(ctx, c.subject, []Bucket{c.b}, cost, "scope", key); err == nil {
				break
			}
			c.heal()
		}
		if err != nil {
			rt.Fatalf("usage %d never answered: %v", cost, err)
		}
		if cost < 0 {
			cost = -min(-cost, r.charged[k])
		}
		r.charged[k] += cost
		a.spent += cost
	case "drain":
		p.l.global.mu.Lock()
		var ps []*pool
		for _, q := range p.l.global.pools {
			ps = append(ps, q)
		}
		p.l.global.mu.Unlock()
		for _, q := range ps {
			_ = p.l.drain(ctx, q)
		}
	case "shutdown":
		_ = p.l.Close(ctx)
		r.closed = append(r.closed, p.l)
		for j, q := range r.procs {
			if q == p {
				r.procs = append(r.procs[:j], r.procs[j+1:]...)
				break
			}
		}
		c.start(r, ri)
	case "read":
		c.read(rt, r, ri)
	case "reset":
		a, _ := c.account()
		c.quiet()
		usedBefore, heldBefore := c.held(rt, a)
		// An operator whose reset failed runs it again until answered: a
		// reset whose answer was lost may have applied.
		var err error
		for range 20 {
			if _, err = p.l.ResetGlobal(ctx, c.subject, c.b); err == nil {
				break
			}
			c.heal()
		}
		if err != nil {
			rt.Fatalf("reset never answered: %v", err)
		}
		used, pools := c.ledgerAndPools(rt, a)
		if used < pools {
			rt.Logf("after a reset the ledger counts %d, fewer than the %d the pools hold", used, pools)
			rt.Fatal("a reset left the ledger counting fewer tokens than the pools hold")
		}
		// The reset keeps counted what the Regions held at their last
		// ledger writes (pools and usage they may refund), and nothing
		// more: the budget starts again.
		if want := min(heldBefore, usedBefore); used != want {
			rt.Logf("after a reset the ledger counts %d, want what the Regions held, %d (it counted %d)", used, want, usedBefore)
			rt.Fatal("a reset did not start the budget again from what the Regions held")
		}
		a.spent, a.reset = 0, true
		a.base = used - pools
	case "rollover":
		_, end := GlobalWindow(c.b, c.now)
		c.now = end.Add(time.Duration(rapid.IntRange(0, 3600).Draw(rt, "into")) * time.Second)
	case "edit":
		switch rapid.SampledFrom([]string{"limit", "period", "anchor"}).Draw(rt, "field") {
		case "limit":
			c.b.Limit = int64(rapid.IntRange(20, 400).Draw(rt, "limit"))
		case "period":
			if c.b.Window == Daily {
				c.b.Window, c.b.Period = Weekly, 7*24*time.Hour
			} else {
				c.b.Window, c.b.Period = Daily, 24*time.Hour
			}
		case "anchor":
			c.b.Anchor = time.Date(2026, 1, 1, rapid.IntRange(0, 23).Draw(rt, "hour"), 0, 0, 0, time.UTC)
		}
	case "fault":
		switch rapid.SampledFrom([]string{"redis-drop", "redis-lose", "redis-cut", "ledger-drop", "ledger-lose", "ledger-conflict", "ledger-cut"}).Draw(rt, "fault") {
		case "redis-drop":
			r.slot.redis.arm(dropCmd, rapid.IntRange(0, 4).Draw(rt, "skip"))
		case "redis-lose":
			r.slot.redis.arm(loseRepl, rapid.IntRange(0, 4).Draw(rt, "skip"))
		case "redis-cut":
			r.slot.redis.setCut(true)
		case "ledger-drop":
			r.slot.ledger.FailNext(ledgerproxy.Drop)
		case "ledger-lose":
			r.slot.ledger.FailNext(ledgerproxy.LoseReply)
		case "ledger-conflict":
			r.slot.ledger.FailNext(ledgerproxy.Conflict)
		case "ledger-cut":
			r.slot.ledger.SetDown(true)
		}
	case "heal":
		c.heal()
	}
}

// heal disarms and restores every fault.
func (c *checker) heal() {
	for _, r := range c.regions {
		r.slot.redis.next.Store(0)
		r.slot.redis.setCut(false)
		r.slot.ledger.FailNext(0)
		r.slot.ledger.SetDown(false)
	}
}

// read is the admin read of the subject view in Region r: a process of
// its own, as admin-read is, that must write nothing.
func (c *checker) read(rt *rapid.T, r *region, ri int) {
	c.quiet()
	before := c.dump(rt, r)
	l := New(c.direct, Options{Prefix: r.prefix, Timeout: time.Second, DenyCacheSize: -1, BreakerThreshold: -1,
		Ledger: r.slot.table, Regions: len(c.regions), Region: "r" + strconv.Itoa(ri), LedgerTimeout: time.Second})
	l.global.clock = func() time.Time { return c.now }
	defer l.Close(context.Background())
	st, err := l.Global(context.Background(), c.subject, c.b)
	if err != nil {
		return // the ledger is cut: nothing to compare
	}
	if n := len(l.global.pools); n != 0 {
		rt.Logf("an admin read registered %d pools in its process", n)
		rt.Fatal("an admin read registered a pool")
	}
	if after := c.dump(rt, r); after != before {
		rt.Logf("before %s\nafter  %s", before, after)
		rt.Fatal("an admin read wrote to Redis")
	}
	a, _ := c.account()
	pool := c.poolLevel(rt, r, a)
	if want := max(c.b.Limit-st.Used+max(pool, 0), 0); st.Remaining != want {
		rt.Logf("admin read: remaining %d, want limit %d - used %d + pool %d = %d", st.Remaining, c.b.Limit, st.Used, pool, want)
		rt.Fatal("an admin read's remaining is not limit - used + pool")
	}
}

// dump is Region r's keys and values, for comparing.
func (c *checker) dump(rt *rapid.T, r *region) string {
	ctx := context.Background()
	keys, err := c.direct.Keys(ctx, r.prefix+"*").Result()
	if err != nil {
		rt.Fatal(err)
	}
	out := ""
	for _, k := range keys {
		v, _ := c.direct.Dump(ctx, k).Result()
		out += fmt.Sprintf("%s=%q;", k, v)
	}
	return fmt.Sprint(len(keys), " keys: ", out)
}

func (c *checker) poolLevel(rt *rapid.T, r *region, a *account) int64 {
	l := &Limiter{prefix: r.prefix, hash: r.procs[0].l.hash, global: r.procs[0].l.global}
	p := l.newPool(l.hash.digest(c.subject), a.b, a.start, a.end)
	n, err := c.direct.Get(context.Background(), p.key).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		rt.Fatal(err)
	}
	return n
}

// ledgerAndPools reads a's item in the ledger (directly) and the pools of
// every Region.
func (c *checker) ledgerAndPools(rt *rapid.T, a *account) (used, pools int64) {
	r0 := c.regions[0]
	l := &Limiter{prefix: r0.prefix, hash: r0.procs[0].l.hash, global: r0.procs[0].l.global}
	p := l.newPool(l.hash.digest(c.subject), a.b, a.start, a.end)
	var err error
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		used, err = c.regions[0].slot.table.Used(ctx, p.item)
		cancel()
		if err == nil {
			break
		}
		c.heal()
	}
	if err != nil {
		rt.Fatal(err)
	}
	for _, r := range c.regions {
		pools += c.poolLevel(rt, r, a)
	}
	return used, pools
}

// held reads a's item in the ledger: its used count and what the Regions
// held at their last writes (the held_<region> attributes).
func (c *checker) held(rt *rapid.T, a *account) (used, held int64) {
	r0 := c.regions[0]
	l := &Limiter{prefix: r0.prefix, hash: r0.procs[0].l.hash, global: r0.procs[0].l.global}
	p := l.newPool(l.hash.digest(c.subject), a.b, a.start, a.end)
	out, err := c.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &c.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: p.item}},
	})
	if err != nil {
		rt.Fatal(err)
	}
	for name, v := range out.Item {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		x, _ := strconv.ParseInt(n.Value, 10, 64)
		switch {
		case name == "used":
			used = x
		case strings.HasPrefix(name, "held_"):
			held += max(x, 0)
		}
	}
	return used, held
}

// stranded is what every process, running or shut down, counted
// stranded.
func (c *checker) stranded() int64 {
	var n int64
	for _, r := range c.regions {
		for _, p := range r.procs {
			n += int64(p.l.global.stranded.Load())
		}
		for _, l := range r.closed {
			n += int64(l.global.stranded.Load())
		}
	}
	return n
}

// check holds the invariants after a step.
func (c *checker) check(rt *rapid.T) {
	c.quiet()
	stranded := c.stranded()
	var gaps int64
	for k, a := range c.items {
		used, pools := c.ledgerAndPools(rt, a)
		gap := used - pools - a.spent
		if a.reset {
			gap -= a.base // what the reset left counted beyond the pools
		}
		if gap < 0 {
			rt.Logf("item %s: ledger used %d < pools %d + spent %d (+ %d at a reset): %d tokens made", k, used, pools, a.spent, a.base, -gap)
			rt.Fatal("tokens made: ledger used < pools + spent")
		}
		gaps += gap
		// Since a reset, what the Regions held then and the budget left
		// are all that may be spent, but for usage reported after the
		// fact, which may leave a pool in debt (the next block pays it).
		var debt int64
		for _, r := range c.regions {
			debt += max(-c.poolLevel(rt, r, a), 0)
		}
		if a.spent+a.base > a.maxLimit+debt {
			rt.Logf("item %s: spent %d (+ %d the reset kept) over the limit %d and the pools' debt %d", k, a.spent, a.base, a.maxLimit, debt)
			rt.Fatal("spent over the limit")
		}
		for _, r := range c.regions {
			n := int64(len(c.regions))
			if open := (a.maxLimit + n - 1) / n; r.credit[k] > open {
				rt.Logf("item %s: a Region admitted %d on its allowance, more than %d", k, r.credit[k], open)
				rt.Fatal("a Region admitted more than its allowance")
			}
		}
	}
	if gaps > stranded {
		rt.Logf("ledger used - pools - spent = %d over every item, but only %d counted stranded", gaps, stranded)
		rt.Fatal("tokens lost silently: ledger used - pools - spent > stranded")
	}
}
