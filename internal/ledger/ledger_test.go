package ledger_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgerproxy"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// newTable creates a ledger table of the test's own on the test dynalite
// (deleted when the test ends) and returns its name.
func newTable(tb testing.TB) string {
	_, name := ledgertest.Table(tb)
	return name
}

func client(tb testing.TB, endpoint string) *dynamodb.Client { return ledgertest.Client(tb, endpoint) }

// open returns a Table on the table name at endpoint.
func open(tb testing.TB, endpoint, name string, o ledger.Options) *ledger.Table {
	tb.Helper()
	o.Table = name
	return ledger.New(client(tb, endpoint), o)
}

// proxy returns a ledgerproxy in front of the test dynalite, and its URL.
func proxy(tb testing.TB, o ledgerproxy.Options) (*ledgerproxy.Proxy, string) {
	tb.Helper()
	o.Target = testenv.DynamoDBURL(tb)
	p, err := ledgerproxy.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	s := httptest.NewServer(p)
	tb.Cleanup(s.Close)
	return p, s.URL
}

var window = time.Now().Add(time.Hour)

func TestTakeGiveUsed(t *testing.T) {
	t.Parallel()
	tbl := open(t, testenv.DynamoDBURL(t), newTable(t), ledger.Options{})
	ctx := context.Background()
	steps := []struct {
		op       string // take, give
		n, limit int64
		want     int64 // taken (take)
		used     int64 // after the step
	}{
		{"take", 30, 100, 30, 30},
		{"take", 80, 100, 70, 100}, // what is left
		{"take", 1, 100, 0, 100},   // spent
		{"give", 50, 0, 0, 50},
		{"take", 10, 40, 0, 50}, // limit lowered below used
		{"take", 10, 55, 5, 55}, // limit lowered above used
		{"give", 100, 0, 0, 0},  // never below 0
		{"give", 1, 0, 0, 0},
		{"take", 7, 100, 7, 7},
	}
	for i, s := range steps {
		switch s.op {
		case "take":
			got, err := tbl.Take(ctx, "k", s.n, s.limit, window, "r", 0)
			if err != nil || got != s.want {
				t.Fatalf("step %d: Take(k, %d, %d) = %d, %v; want %d", i, s.n, s.limit, got, err, s.want)
			}
		case "give":
			if err := tbl.Give(ctx, "k", s.n, "r", 0); err != nil {
				t.Fatalf("step %d: Give(k, %d) = %v", i, s.n, err)
			}
		}
		if used, err := tbl.Used(ctx, "k"); err != nil || used != s.used {
			t.Fatalf("step %d (%s %d): Used(k) = %d, %v; want %d", i, s.op, s.n, used, err, s.used)
		}
	}
	if st := tbl.Stats(); st.Takes != 6 || st.Gives != 3 || st.Errors != 0 || st.Conflicts != 0 {
		t.Errorf("Stats() = %+v, want 6 takes, 3 gives, no errors or conflicts", st)
	}
}

func TestTakeEdges(t *testing.T) {
	t.Parallel()
	tbl := open(t, testenv.DynamoDBURL(t), newTable(t), ledger.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name                string
		used                int64 // taken before, with a limit of 1000
		want, limit, took   int64
		usedAfter, maxCalls int64
	}{
		{name: "empty", want: 10, limit: 100, took: 10, usedAfter: 10, maxCalls: 1},
		{name: "want over limit", want: 150, limit: 100, took: 100, usedAfter: 100, maxCalls: 1},
		{name: "exactly the rest", used: 90, want: 10, limit: 100, took: 10, usedAfter: 100, maxCalls: 1},
		{name: "one left", used: 99, want: 10, limit: 100, took: 1, usedAfter: 100, maxCalls: 3},
		{name: "spent", used: 100, want: 10, limit: 100, took: 0, usedAfter: 100, maxCalls: 3}, // and the held count
		{name: "limit lowered below used", used: 200, want: 1, limit: 100, took: 0, usedAfter: 200, maxCalls: 3},
		{name: "zero want", used: 5, want: 0, limit: 100, took: 0, usedAfter: 5},
		{name: "negative want", used: 5, want: -3, limit: 100, took: 0, usedAfter: 5},
		{name: "zero limit", want: 5, limit: 0, took: 0, usedAfter: 0},
		{name: "negative limit", want: 5, limit: -1, took: 0, usedAfter: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "edge:" + tc.name
			if tc.used > 0 {
				if got, err := tbl.Take(ctx, key, tc.used, 1000, window, "r", 0); err != nil || got != tc.used {
					t.Fatalf("setup Take(%d) = %d, %v", tc.used, got, err)
				}
			}
			before := tbl.Stats().Calls
			got, err := tbl.Take(ctx, key, tc.want, tc.limit, window, "r", 0)
			calls := tbl.Stats().Calls - before
			if err != nil || got != tc.took {
				t.Errorf("Take(%s, %d, %d) = %d, %v; want %d", key, tc.want, tc.limit, got, err, tc.took)
			}
			if calls > tc.maxCalls {
				t.Errorf("Take sent %d requests, want at most %d", calls, tc.maxCalls)
			}
			if used, err := tbl.Used(ctx, key); err != nil || used != tc.usedAfter {
				t.Errorf("Used(%s) = %d, %v; want %d", key, used, err, tc.usedAfter)
			}
		})
	}
}

func TestGiveMissing(t *testing.T) {
	t.Parallel()
	tbl := open(t, testenv.DynamoDBURL(t), newTable(t), ledger.Options{})
	ctx := context.Background()
	if err := tbl.Give(ctx, "never", 5, "r", 0); err != nil {
		t.Fatalf("Give(never, 5) = %v", err)
	}
	if used, err := tbl.Used(ctx, "never"); err != nil || used != 0 {
		t.Errorf("Used(never) = %d, %v; want 0", used, err)
	}
	if n, err := tbl.Sweep(ctx, time.Now().Add(24*time.Hour)); err != nil || n != 0 {
		t.Errorf("Sweep after a Give to a missing key = %d, %v; want 0 items (Give creates none)", n, err)
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	tbl := open(t, testenv.DynamoDBURL(t), newTable(t), ledger.Options{})
	ctx := context.Background()
	now := time.Now()
	ended := []string{"a", "b", "c"}
	for _, k := range ended {
		if _, err := tbl.Take(ctx, k, 1, 10, now.Add(-time.Minute), "r", 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.Take(ctx, "live", 4, 10, now.Add(time.Minute), "r", 0); err != nil {
		t.Fatal(err)
	}
	if n, err := tbl.Sweep(ctx, now); err != nil || n != len(ended) {
		t.Fatalf("Sweep(now) = %d, %v; want %d", n, err, len(ended))
	}
	for _, k := range ended {
		if used, err := tbl.Used(ctx, k); err != nil || used != 0 {
			t.Errorf("Used(%s) after Sweep = %d, %v; want 0", k, used, err)
		}
	}
	if used, err := tbl.Used(ctx, "live"); err != nil || used != 4 {
		t.Errorf("Used(live) after Sweep = %d, %v; want 4", used, err)
	}
	if n, err := tbl.Sweep(ctx, now); err != nil || n != 0 {
		t.Errorf("second Sweep(now) = %d, %v; want 0", n, err)
	}
}

// TestSweepPages sweeps more items than fit one Scan page (1 MB, or
// dynalite's own page size), with the deletes spread over pages.
func TestSweepPages(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300 items")
	}
	t.Parallel()
	tbl := open(t, testenv.DynamoDBURL(t), newTable(t), ledger.Options{})
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	const n = 300
	for i := range n {
		if _, err := tbl.Take(ctx, strings.Repeat("x", 600)+string(rune('a'+i%26))+time.Duration(i).String(), 1, 10, past, "r", 0); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := tbl.Sweep(ctx, time.Now()); err != nil || got != n {
		t.Errorf("Sweep = %d, %v; want %d", got, err, n)
	}
}

// TestConcurrentTakes takes from one budget from three Tables (three
// Regions, each with its own client and conflicts injected on its link)
// and many goroutines each: the tokens taken add up to exactly
// min(limit, tokens wanted), the ledger's used count agrees, and every
// conflict was retried.
func TestConcurrentTakes(t *testing.T) {
	t.Parallel()
	name := newTable(t)
	const regions, workers, takes, maxWant = 3, 8, 6, 7
	for _, tc := range []struct {
		name  string
		limit int64
	}{{"spent", 300}, {"room to spare", 1_000_000}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var tables []*ledger.Table
			var proxies []*ledgerproxy.Proxy
			for range regions {
				p, url := proxy(t, ledgerproxy.Options{Conflict: 0.2})
				proxies = append(proxies, p)
				// dynalite writes one item at a time, slowly: 48 writers
				// queue past the default 500ms.
				tables = append(tables, open(t, url, name, ledger.Options{Timeout: 10 * time.Second, MaxAttempts: 50, Backoff: time.Millisecond}))
			}
			key := "concurrent:" + tc.name
			var taken, wanted atomic.Int64
			var wg sync.WaitGroup
			for r := range regions {
				for range workers {
					wg.Go(func() {
						for range takes {
							want := 1 + rand.Int64N(maxWant)
							wanted.Add(want)
							got, err := tables[r].Take(context.Background(), key, want, tc.limit, window, "r", 0)
							if err != nil {
								t.Errorf("Take(%d) = %v", want, err)
								return
							}
							if got < 0 || got > want {
								t.Errorf("Take(%d) = %d, want 0..%d", want, got, want)
							}
							taken.Add(got)
						}
					})
				}
			}
			wg.Wait()
			if want := min(tc.limit, wanted.Load()); taken.Load() != want {
				t.Errorf("taken in all = %d, want min(limit %d, wanted %d) = %d", taken.Load(), tc.limit, wanted.Load(), want)
			}
			used, err := tables[0].Used(context.Background(), key)
			if err != nil || used != taken.Load() {
				t.Errorf("Used = %d, %v; want %d, the sum taken", used, err, taken.Load())
			}
			var conflicts, injected int64
			for i, tbl := range tables {
				st := tbl.Stats()
				conflicts += st.Conflicts
				injected += proxies[i].Stats().Conflicts
				if st.Retries != st.Conflicts || st.Errors != 0 {
					t.Errorf("region %d: Stats() = %+v, want every conflict retried and no errors", i, st)
				}
			}
			if conflicts == 0 || conflicts != injected {
				t.Errorf("conflicts seen = %d, injected %d; want the same, above 0", conflicts, injected)
			}
			t.Logf("limit %d: wanted %d, taken %d, %d conflicts retried", tc.limit, wanted.Load(), taken.Load(), conflicts)
		})
	}
}

func TestConflictsExhausted(t *testing.T) {
	t.Parallel()
	name := newTable(t)
	_, url := proxy(t, ledgerproxy.Options{Conflict: 1})
	tbl := open(t, url, name, ledger.Options{MaxAttempts: 4, Backoff: time.Millisecond})
	got, err := tbl.Take(context.Background(), "k", 5, 10, window, "r", 0)
	var conflict *types.ReplicatedWriteConflictException
	if got != 0 || !errors.Is(err, ledger.ErrContended) || !errors.As(err, &conflict) {
		t.Fatalf("Take through all conflicts = %d, %v; want 0, ErrContended wrapping ReplicatedWriteConflictException", got, err)
	}
	if st := tbl.Stats(); st.Calls != 4 || st.Conflicts != 4 || st.Retries != 3 || st.Errors != 1 {
		t.Errorf("Stats() = %+v, want 4 calls, 4 conflicts, 3 retries, 1 error", st)
	}
	direct := open(t, testenv.DynamoDBURL(t), name, ledger.Options{})
	if used, err := direct.Used(context.Background(), "k"); err != nil || used != 0 {
		t.Errorf("Used(k) = %d, %v; want 0: nothing was written", used, err)
	}
}

// TestCutOff: with the ledger unreachable each call fails, by itself, within
// its timeout; back up, the budget is as it was.
func TestCutOff(t *testing.T) {
	t.Parallel()
	name := newTable(t)
	p, url := proxy(t, ledgerproxy.Options{})
	tbl := open(t, url, name, ledger.Options{Timeout: 200 * time.Millisecond})
	ctx := context.Background()
	if got, err := tbl.Take(ctx, "k", 5, 10, window, "r", 0); err != nil || got != 5 {
		t.Fatalf("Take = %d, %v; want 5", got, err)
	}
	p.SetDown(true)
	start := time.Now()
	if got, err := tbl.Take(ctx, "k", 5, 10, window, "r", 0); err == nil || got != 0 {
		t.Errorf("Take while cut off = %d, %v; want 0 and an error", got, err)
	}
	if err := tbl.Give(ctx, "k", 5, "r", 0); err == nil {
		t.Error("Give while cut off = nil, want an error")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("two calls while cut off took %v, want each within its 200ms timeout", took)
	}
	if p.Stats().Refused == 0 {
		t.Errorf("proxy Stats() = %+v, want refused connections", p.Stats())
	}
	p.SetDown(false)
	if used, err := tbl.Used(ctx, "k"); err != nil || used != 5 {
		t.Errorf("Used after the cut = %d, %v; want 5", used, err)
	}
}

// TestSlowLedger: a reply later than Timeout fails the call at Timeout.
func TestSlowLedger(t *testing.T) {
	t.Parallel()
	name := newTable(t)
	_, url := proxy(t, ledgerproxy.Options{Delay: func() time.Duration { return 2 * time.Second }})
	tbl := open(t, url, name, ledger.Options{Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := tbl.Take(context.Background(), "k", 1, 10, window, "r", 0)
	if took := time.Since(start); err == nil || !errors.Is(err, context.DeadlineExceeded) || took > time.Second {
		t.Errorf("Take on a 2s ledger = %v after %v; want a deadline error at about 100ms", err, took)
	}
}

// BenchmarkTake takes one token at a time from a budget it never spends,
// from parallel goroutines over 16 keys, straight to dynalite.
func BenchmarkTake(b *testing.B) {
	tbl := open(b, testenv.DynamoDBURL(b), newTable(b), ledger.Options{})
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		key := "bench:" + time.Duration(next.Add(1)%16).String()
		for pb.Next() {
			if got, err := tbl.Take(context.Background(), key, 1, 1<<62, window, "r", 0); err != nil || got != 1 {
				b.Errorf("Take = %d, %v; want 1", got, err)
				return
			}
		}
	})
	st := tbl.Stats()
	b.ReportMetric(float64(st.Calls)/float64(b.N), "calls/op")
}

// TestDropMidBody: a client that drops a request while dynalite reads its
// body (a ledger call timing out mid-send) leaves the server answering
// the others, as DynamoDB does: testenv runs dynalite behind
// scripts/dynalite.sh's run.js, without which dynalite 4.0.0 exits.
func TestDropMidBody(t *testing.T) {
	endpoint := testenv.DynamoDBURL(t)
	name := newTable(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-amz-json-1.0\r\n" +
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 100\r\n\r\n{\"a\":"))
		time.Sleep(50 * time.Millisecond) // sleep: dynalite reads the partial body before the drop
		_ = c.Close()
	}
	time.Sleep(100 * time.Millisecond) // sleep: time for a dynalite that dies of a drop to die
	tb := open(t, endpoint, name, ledger.Options{})
	if _, err := tb.Used(context.Background(), "after-drops"); err != nil {
		t.Fatalf("dynalite after three dropped requests: %v", err)
	}
}
