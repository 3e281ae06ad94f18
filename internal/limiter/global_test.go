package limiter_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgerproxy"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/testenv"
)

// The global tests run Regions as Limiters of their own key prefix on the
// test Redis (each Region has a Redis of its own in production: nothing
// but the ledger joins them) over one ledger table on the test dynalite,
// reached directly or through a ledgerproxy that adds MRSC's conflicts and
// cuts the ledger off.

// proxied serves a ledgerproxy to the test DynamoDB API with o's faults
// until t ends, and returns it and its URL.
func proxied(t testing.TB, o ledgerproxy.Options) (*ledgerproxy.Proxy, string) {
	o.Target = testenv.DynamoDBURL(t)
	p, err := ledgerproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// ledgerTable creates a ledger table of the test's own, deleted after it.
func ledgerTable(t testing.TB) string {
	_, name := ledgertest.Table(t)
	return name
}

// region is one Region: a Limiter over its own prefix and the shared
// ledger at endpoint.
type region struct {
	lim    *limiter.Limiter
	ledger *ledger.Table
}

func newRegion(t testing.TB, rdb redis.UniversalClient, endpoint, table string, regions int, o limiter.Options) region {
	t.Helper()
	lt := ledger.New(ledgertest.Client(t, endpoint), ledger.Options{Table: table, Timeout: time.Second})
	o.Prefix = testenv.Prefix(t, "global")
	testenv.DeleteKeys(t, rdb, o.Prefix)
	o.Ledger, o.Regions = lt, regions
	if o.Timeout == 0 {
		o.Timeout = time.Second
	}
	if o.LedgerTimeout == 0 {
		o.LedgerTimeout = 2 * time.Second
	}
	l := limiter.New(rdb, o)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return region{lim: l, ledger: lt}
}

func globalClient(t testing.TB) *redis.Client {
	return testenv.Client(t, testenv.RedisURL(t), func(o *redis.Options) { o.PoolSize = 32; o.Protocol = 2 })
}

// hammer sends n requests of cost 1 for subject through each Region, from
// workers goroutines per Region, and returns how many each admitted.
func hammer(t testing.TB, rs []region, subject string, b limiter.Bucket, n, workers int) []int64 {
	t.Helper()
	admitted := make([]int64, len(rs))
	var wg sync.WaitGroup
	for ri, r := range rs {
		var left atomic.Int64
		left.Store(int64(n))
		for range workers {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					// An error comes with the failure mode's decision (a
					// ledger cut off): the decision counts.
					d, _ := r.lim.Allow(context.Background(), limiter.Request{Subject: subject, Buckets: []limiter.Bucket{b}, Cost: 1})
					if d.Allowed {
						atomic.AddInt64(&admitted[ri], 1)
					}
				}
			})
		}
	}
	wg.Wait()
	return admitted
}

func sum(xs []int64) (s int64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// TestGlobalExact: three Regions that each want more than the whole budget
// admit exactly the budget between them, quota and rate alike.
func TestGlobalExact(t *testing.T) {
	rdb := globalClient(t)
	endpoint := testenv.DynamoDBURL(t)
	for _, tc := range []struct {
		name string
		b    limiter.Bucket
	}{
		{"quota", limiter.Bucket{ID: "q", Limit: 600, Period: 24 * time.Hour, Window: limiter.Daily, Global: "gq"}},
		// A rate of 600 per 24 h: the test runs in one ledger window.
		{"rate", limiter.Bucket{ID: "r", Limit: 600, Period: 24 * time.Hour, Global: "gr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := ledgerTable(t)
			var rs []region
			for range 3 {
				rs = append(rs, newRegion(t, rdb, endpoint, table, 3, limiter.Options{}))
			}
			start, _ := limiter.GlobalWindow(tc.b, time.Now())
			got := hammer(t, rs, "tenant-"+tc.name, tc.b, 400, 4)
			if s, _ := limiter.GlobalWindow(tc.b, time.Now()); !s.Equal(start) {
				t.Skip("the run crossed a window boundary")
			}
			checkLedger(t, rs, "tenant-"+tc.name, tc.b, got)
			for i, r := range rs {
				gs := r.lim.GlobalStats()
				t.Logf("region %d: admitted %d, takes %d, waits %d", i, got[i], gs.Takes, gs.Waits)
			}
		})
	}
}

// checkLedger holds the invariant of global buckets after a run whose
// demand passed the limit: the ledger gave out the whole budget, and each
// token of it was admitted once or sits in one Region's pool; none was
// admitted twice, none was lost.
func checkLedger(t *testing.T, rs []region, subject string, b limiter.Bucket, admitted []int64) {
	t.Helper()
	var pools int64
	var used int64
	for _, r := range rs {
		st, err := r.lim.Global(context.Background(), subject, b)
		if err != nil {
			t.Fatal(err)
		}
		pools += st.Pool
		used = st.Used
	}
	if sum(admitted) > b.Limit {
		t.Errorf("admitted %v = %d in all: over the limit %d", admitted, sum(admitted), b.Limit)
	}
	if used != b.Limit || sum(admitted)+pools != used {
		t.Errorf("ledger used %d, admitted %v = %d, pools %d: want used = limit %d = admitted + pools", used, admitted, sum(admitted), pools, b.Limit)
	}
	t.Logf("admitted %v, %d left in pools", admitted, pools)
}

// TestGlobalConflicts: 30 % of the ledger's writes meet another Region's
// (ReplicatedWriteConflictException): still exact.
func TestGlobalConflicts(t *testing.T) {
	rdb := globalClient(t)
	table := ledgerTable(t)
	p, url := proxied(t, ledgerproxy.Options{Conflict: 0.3})
	b := limiter.Bucket{ID: "q", Limit: 300, Period: 24 * time.Hour, Window: limiter.Daily, Global: "gc"}
	var rs []region
	for range 3 {
		rs = append(rs, newRegion(t, rdb, url, table, 3, limiter.Options{}))
	}
	got := hammer(t, rs, "tenant", b, 200, 3)
	checkLedger(t, rs, "tenant", b, got)
	if p.Stats().Conflicts == 0 {
		t.Error("the proxy injected no conflict")
	}
}

// TestGlobalCutOff: a Region cut off from the ledger spends its pool, then
// follows the failure mode: closed denies, open admits its allowance,
// OpenShare of the limit, and no more.
func TestGlobalCutOff(t *testing.T) {
	rdb := globalClient(t)
	table := ledgerTable(t)
	for _, closed := range []bool{true, false} {
		p, url := proxied(t, ledgerproxy.Options{})
		r := newRegion(t, rdb, url, table, 2, limiter.Options{LedgerTimeout: 300 * time.Millisecond})
		b := limiter.Bucket{ID: "q", Limit: 1000, Period: 24 * time.Hour, Window: limiter.Daily, Global: "cut", FailClosed: closed}
		subject := "tenant-open"
		if closed {
			subject = "tenant-closed"
		}
		// One request takes a block (the least: a thousandth, at least 1).
		d, err := r.lim.Allow(context.Background(), limiter.Request{Subject: subject, Buckets: []limiter.Bucket{b}, Cost: 1})
		if err != nil || !d.Allowed {
			t.Fatalf("first request: %+v, %v", d, err)
		}
		// Let any background refill finish before the cut.
		r.lim.WaitGlobalRefills()
		p.SetDown(true)
		pool := r.lim.GlobalStats().Taken - 1
		got := hammer(t, []region{r}, subject, b, 1000, 2)[0]
		want := int64(pool)
		if !closed {
			want += 500 // the allowance: 1000 / 2 Regions
		}
		if got != want {
			t.Errorf("closed=%v: cut off, admitted %d, want %d (pool %d)", closed, got, want, pool)
		}
	}
}

// TestGlobalGiveBack: a Region that closes gives its unspent pool back to
// the ledger, so the ledger's count is what was spent.
func TestGlobalGiveBack(t *testing.T) {
	rdb := globalClient(t)
	table := ledgerTable(t)
	endpoint := testenv.DynamoDBURL(t)
	r := newRegion(t, rdb, endpoint, table, 1, limiter.Options{})
	b := limiter.Bucket{ID: "q", Limit: 100000, Period: 24 * time.Hour, Window: limiter.Daily, Global: "give"}
	for range 7 {
		if d, err := r.lim.Allow(context.Background(), limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1}); err != nil || !d.Allowed {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	r.lim.WaitGlobalRefills() // a background refill in flight
	st, err := r.lim.Global(context.Background(), "s", b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Used < 7 || st.Used-st.Pool != 7 {
		t.Errorf("before close: used %d, pool %d: want used - pool = 7", st.Used, st.Pool)
	}
	if err := r.lim.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	used, err := r.ledger.Used(context.Background(), "give#"+limiter.SubjectHash("s")+"#"+windowMillis(b))
	if err != nil {
		t.Fatal(err)
	}
	if used != 7 {
		t.Errorf("after close the ledger counts %d, want the 7 spent", used)
	}
}

// windowMillis names b's window now in the ledger's item: its start and
// end, Unix ms.
func windowMillis(b limiter.Bucket) string {
	s, e := limiter.GlobalWindow(b, time.Now())
	return strconv.FormatInt(s.UnixMilli(), 10) + "-" + strconv.FormatInt(e.UnixMilli(), 10)
}

func TestGlobalWindow(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		b               limiter.Bucket
		now, start, end string
	}{
		{limiter.Bucket{Window: limiter.Daily}, "2026-12-04T18:00:00Z", "2026-12-04T00:00:00Z", "2026-12-05T00:00:00Z"},
		{limiter.Bucket{Window: limiter.Weekly}, "2026-12-04T18:00:00Z", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},
		{limiter.Bucket{Window: limiter.Monthly}, "2026-12-04T18:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{limiter.Bucket{Window: limiter.Yearly}, "2026-12-04T18:00:00Z", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{limiter.Bucket{Window: limiter.Monthly, Anchor: at("2024-01-31T12:00:00Z")}, "2027-02-28T13:00:00Z", "2027-02-28T12:00:00Z", "2027-03-31T12:00:00Z"},
		{limiter.Bucket{Window: limiter.Monthly, Anchor: at("2024-01-31T12:00:00Z")}, "2027-02-28T11:00:00Z", "2027-01-31T12:00:00Z", "2027-02-28T12:00:00Z"},
		{limiter.Bucket{Window: limiter.Daily, Anchor: at("2030-01-01T06:00:00Z")}, "2026-12-04T05:00:00Z", "2026-12-03T06:00:00Z", "2026-12-04T06:00:00Z"},
		{limiter.Bucket{Period: time.Minute}, "2026-12-04T18:00:59Z", "2026-12-04T18:00:00Z", "2026-12-04T18:01:00Z"},
		{limiter.Bucket{Period: time.Hour}, "2026-12-04T18:30:00Z", "2026-12-04T18:00:00Z", "2026-12-04T19:00:00Z"},
	} {
		s, e := limiter.GlobalWindow(tc.b, at(tc.now))
		if !s.Equal(at(tc.start)) || !e.Equal(at(tc.end)) {
			t.Errorf("GlobalWindow(%+v, %s) = %s..%s, want %s..%s", tc.b, tc.now, s.Format(time.RFC3339), e.Format(time.RFC3339), tc.start, tc.end)
		}
	}
}

// BenchmarkGlobalAllow is one decision of a quota, regional and global
// (its pool full: no request waits on the ledger), side by side on the
// test Redis and dynalite.
//
//	scripts/testenv.sh go test -run '^$' -bench GlobalAllow -count 6 ./internal/limiter/
func BenchmarkGlobalAllow(b *testing.B) {
	rdb := globalClient(b)
	r := newRegion(b, rdb, testenv.DynamoDBURL(b), ledgerTable(b), 3, limiter.Options{})
	for _, global := range []string{"", "bench"} {
		name := "regional"
		if global != "" {
			name = "global"
		}
		b.Run(name, func(b *testing.B) {
			bs := []limiter.Bucket{{ID: "q" + name, Limit: 1_000_000_000, Period: 24 * time.Hour, Window: limiter.Monthly, Global: global}}
			req := limiter.Request{Subject: "bench", Buckets: bs, Cost: 1}
			for b.Loop() {
				if d, err := r.lim.Allow(context.Background(), req); err != nil || !d.Allowed {
					b.Fatalf("%+v, %v", d, err)
				}
			}
		})
	}
}

// DynamoDB on-demand, us-east-1: $0.625 per million write request units,
// and a write to an MRSC global table is billed in each of its three
// Regions (replicated write units, same price); a ledger item is under
// 1 KB, one unit per write (aws.amazon.com/dynamodb/pricing/on-demand,
// recalled 2026-12-04).
const (
	usdPerMillionWRU = 0.625
	replicas         = 3
)

// BenchmarkGlobalSteady runs three Regions at a steady, even load of
// global decisions (b.N of them, paced at perRegion a second in each
// Region) against one ledger, and reports what the issue asks of it:
// ledger calls (takes and gives) per decision, the added ledger cost per
// million decisions at list price, what each Region holds unspent at the
// end (stranded if its traffic left now), and over-admission (admitted
// above the limit, which must be 0).
//
//	scripts/testenv.sh go test -run '^$' -bench GlobalSteady -benchtime 6000x ./internal/limiter/
func BenchmarkGlobalSteady(b *testing.B) {
	rdb := globalClient(b)
	endpoint := testenv.DynamoDBURL(b)
	for _, tc := range []struct {
		name      string
		bucket    limiter.Bucket
		perRegion int
	}{
		{"quota-1M-month", limiter.Bucket{ID: "q", Limit: 1_000_000, Period: 24 * time.Hour, Window: limiter.Monthly, Global: "steady-q"}, 100},
		{"rate-10k-minute", limiter.Bucket{ID: "r", Limit: 10_000, Period: time.Minute, Global: "steady-r"}, 50},
	} {
		b.Run(tc.name, func(b *testing.B) {
			table := ledgerTable(b)
			var rs []region
			for range 3 {
				rs = append(rs, newRegion(b, rdb, endpoint, table, 3, limiter.Options{}))
			}
			var admitted atomic.Int64
			var wg sync.WaitGroup
			per := b.N / 3
			b.ResetTimer()
			for _, r := range rs {
				wg.Go(func() {
					tick := time.NewTicker(time.Second / time.Duration(tc.perRegion))
					defer tick.Stop()
					for range per {
						<-tick.C
						d, _ := r.lim.Allow(context.Background(), limiter.Request{Subject: "steady", Buckets: []limiter.Bucket{tc.bucket}, Cost: 1})
						if d.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			var calls, writes, held int64
			for _, r := range rs {
				st := r.ledger.Stats()
				calls += st.Calls
				writes += st.Takes + st.Gives
				gs, err := r.lim.Global(context.Background(), "steady", tc.bucket)
				if err != nil {
					b.Fatal(err)
				}
				held += gs.Pool
			}
			decisions := float64(3 * per)
			b.ReportMetric(float64(calls)/decisions, "ledger-calls/decision")
			b.ReportMetric(float64(writes)*replicas*usdPerMillionWRU/decisions, "usd/M-decisions")
			b.ReportMetric(float64(held)/3, "unspent/region")
			b.ReportMetric(float64(max(admitted.Load()-tc.bucket.Limit, 0)), "over-admitted")
		})
	}
}

// TestGlobalCluster: on Redis Cluster, a request whose global bucket counts
// another subject (a named dimension) than its regional bucket is one call
// per subject, each with its pools; two Regions still admit at most the
// global limit, and the ledger's count is what they admitted and hold.
func TestGlobalCluster(t *testing.T) {
	var addrs []string
	for _, s := range testenv.StartCluster(t, 3) {
		addrs = append(addrs, s.Addr)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	table := ledgerTable(t)
	endpoint := testenv.DynamoDBURL(t)
	var rs []region
	for range 2 {
		rs = append(rs, newRegion(t, c, endpoint, table, 2, limiter.Options{}))
	}
	g := limiter.Bucket{ID: "g", Limit: 50, Period: 24 * time.Hour, Window: limiter.Daily, Global: "cluster", Subject: "ip:192.0.2.7"}
	bs := []limiter.Bucket{{ID: "r", Limit: 1000, Period: time.Hour}, g}
	var admitted [2]int64
	var wg sync.WaitGroup
	for ri, r := range rs {
		wg.Go(func() {
			for range 60 {
				d, err := r.lim.Allow(context.Background(), limiter.Request{Subject: "key-1", Buckets: bs, Cost: 1})
				if err != nil {
					t.Errorf("region %d: %v", ri, err)
					return
				}
				if d.Allowed {
					admitted[ri]++
				}
			}
		})
	}
	wg.Wait()
	var pools, used int64
	for _, r := range rs {
		st, err := r.lim.Global(context.Background(), "ip:192.0.2.7", g)
		if err != nil {
			t.Fatal(err)
		}
		pools, used = pools+st.Pool, st.Used
	}
	total := admitted[0] + admitted[1]
	if total > g.Limit || used != g.Limit || total+pools != used {
		t.Errorf("admitted %v, pools %d, ledger used %d: want at most %d admitted and admitted + pools = used = %d", admitted, pools, used, g.Limit, g.Limit)
	}
}

// TestGlobalUsage: usage reported after a response (Charge) spends from
// the Region's pool, into debt if need be, so a global quota charged
// that way still holds: admitted + reported + pools = the ledger's count.
func TestGlobalUsage(t *testing.T) {
	rdb := globalClient(t)
	r := newRegion(t, rdb, testenv.DynamoDBURL(t), ledgerTable(t), 1, limiter.Options{})
	b := limiter.Bucket{ID: "u", Limit: 100, Period: 24 * time.Hour, Window: limiter.Daily, Global: "usage"}
	ctx := context.Background()
	req := limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1}
	var admitted int64
	for range 10 {
		if d, _ := r.lim.Allow(ctx, req); d.Allowed {
			admitted++
		}
	}
	if _, err := r.lim.Charge(ctx, "s", []limiter.Bucket{b}, 50, "test", "report-1"); err != nil {
		t.Fatal(err)
	}
	// The same report again is a duplicate: charged once.
	if u, err := r.lim.Charge(ctx, "s", []limiter.Bucket{b}, 50, "test", "report-1"); err != nil || !u.Duplicate {
		t.Fatalf("replay: %+v, %v", u, err)
	}
	for range 100 {
		if d, _ := r.lim.Allow(ctx, req); d.Allowed {
			admitted++
		}
	}
	st, err := r.lim.Global(ctx, "s", b)
	if err != nil {
		t.Fatal(err)
	}
	if admitted+50 > b.Limit || admitted+50+st.Pool != st.Used {
		t.Errorf("admitted %d + reported 50 + pool %d, ledger used %d: want at most %d, and the sum = used", admitted, st.Pool, st.Used, b.Limit)
	}
}

// TestGlobalSweep: a Region's limiter deletes the ledger items of ended
// windows (MRSC has no TTL), one process a Region an hour.
func TestGlobalSweep(t *testing.T) {
	rdb := globalClient(t)
	r := newRegion(t, rdb, testenv.DynamoDBURL(t), ledgerTable(t), 1, limiter.Options{GlobalIdle: 200 * time.Millisecond})
	ctx := context.Background()
	if _, err := r.ledger.Take(ctx, "old#window", 5, 10, time.Now().Add(-time.Hour), "r", 0); err != nil {
		t.Fatal(err)
	}
	b := limiter.Bucket{ID: "s", Limit: 100, Period: 24 * time.Hour, Window: limiter.Daily, Global: "sweep"}
	if _, err := r.lim.Allow(ctx, limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1}); err != nil {
		t.Fatal(err)
	}
	testenv.Await(t, 5*time.Second, 50*time.Millisecond, "the ended window's item deleted from the ledger", func() bool {
		used, err := r.ledger.Used(ctx, "old#window")
		if err != nil {
			t.Fatal(err)
		}
		return used == 0
	})
	st, err := r.lim.Global(ctx, "s", b)
	if err != nil || st.Used == 0 {
		t.Errorf("the live window's item: %+v, %v", st, err)
	}
}

// TestGlobalCloseTwice: Close returns, twice, whether or not a global
// decision ever started the background loop.
func TestGlobalCloseTwice(t *testing.T) {
	rdb := globalClient(t)
	for _, decide := range []bool{false, true} {
		r := newRegion(t, rdb, testenv.DynamoDBURL(t), ledgerTable(t), 1, limiter.Options{})
		if decide {
			b := limiter.Bucket{ID: "c", Limit: 100, Period: 24 * time.Hour, Window: limiter.Daily, Global: "close"}
			_, _ = r.lim.Allow(context.Background(), limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1})
		}
		done := make(chan struct{})
		go func() {
			_ = r.lim.Close(context.Background())
			_ = r.lim.Close(context.Background())
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("decide=%v: Close hangs", decide)
		}
	}
}

// TestGlobalLedgerBreaker: a ledger that answers later than LedgerTimeout
// (a cut that times out) is asked ledgerBreakerThreshold times, then the
// breaker opens and 200 decisions apply the failure mode without asking
// it (within the second of cool-down, a probe or so more).
func TestGlobalLedgerBreaker(t *testing.T) {
	rdb := globalClient(t)
	table := ledgerTable(t)
	p, url := proxied(t, ledgerproxy.Options{Delay: func() time.Duration { return 2 * time.Second }})
	r := newRegion(t, rdb, url, table, 2, limiter.Options{LedgerTimeout: 50 * time.Millisecond})
	b := limiter.Bucket{ID: "q", Limit: 1000, Period: 24 * time.Hour, Window: limiter.Daily, Global: "breaker", FailClosed: true}
	for i := range 200 {
		d, err := r.lim.Allow(context.Background(), limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1})
		if d.Allowed || !errors.Is(err, limiter.ErrLedger) {
			t.Fatalf("decision %d with the ledger timing out: %+v, %v; want a fail-closed deny wrapping ErrLedger", i, d, err)
		}
	}
	// Each request to the proxy is a take, the first ones waited out.
	if n := p.Stats().Requests; n > 5 {
		t.Errorf("200 decisions asked a timing-out ledger %d times; want the breaker open after 3", n)
	}
	if st := r.lim.GlobalStats(); st.Takes > 5 {
		t.Errorf("GlobalStats().Takes = %d, want at most 5", st.Takes)
	}
}

// TestGlobalSpentOncePerRegion: once one process found the ledger with
// nothing left, the Region's other processes learn it from its Redis:
// their 200 denied decisions ask the ledger nothing (they asked it three
// requests each before).
func TestGlobalSpentOncePerRegion(t *testing.T) {
	rdb := globalClient(t)
	table := ledgerTable(t)
	p, url := proxied(t, ledgerproxy.Options{})
	prefix := testenv.Prefix(t, "spent")
	testenv.DeleteKeys(t, rdb, prefix)
	var procs []*limiter.Limiter
	for range 4 {
		lt := ledger.New(ledgertest.Client(t, url), ledger.Options{Table: table, Timeout: time.Second})
		l := limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: time.Second, Ledger: lt, Regions: 1, DenyCacheSize: -1})
		t.Cleanup(func() { _ = l.Close(context.Background()) })
		procs = append(procs, l)
	}
	b := limiter.Bucket{ID: "q", Limit: 10, Period: 24 * time.Hour, Window: limiter.Daily, Global: "spent"}
	req := limiter.Request{Subject: "s", Buckets: []limiter.Bucket{b}, Cost: 1}
	allowed := 0
	for range 12 {
		if d, _ := procs[0].Allow(context.Background(), req); d.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Fatalf("allowed %d of 12, want the limit, 10", allowed)
	}
	before := p.Stats().Requests
	for i := range 200 {
		if d, _ := procs[1+i%3].Allow(context.Background(), req); d.Allowed {
			t.Fatalf("decision %d allowed past a spent budget", i)
		}
	}
	if n := p.Stats().Requests - before; n > 1 {
		t.Errorf("200 denied decisions over 3 other processes sent %d ledger requests, want none", n)
	}
}
