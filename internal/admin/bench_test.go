package admin_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/store/postgres"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// BenchmarkAdmin measures admin operations end to end through the API
// Gateway adapter, against the local PostgreSQL (a fresh database holding
// 1,000 rules) and Redis (the rules published after each write). It reports
// the p50 and p99 latency of one operation; the target is p99 <= 20 ms.
func BenchmarkAdmin(b *testing.B) {
	e := newEnv(b, backends[0]) // postgres
	const seeded = 1000
	ids := make([]string, seeded)
	versions := make([]int64, seeded)
	for i := range ids {
		ids[i] = e.createRule(b, fmt.Sprintf(`{"api":"bench%d","route":"GET /items/{id}","subject":"seed-%d","limit":100,"period":"1m"}`, i%10, i)).ID
		versions[i] = 1
	}
	run := func(b *testing.B, op func(i int) events.APIGatewayProxyRequest, status int) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ev := op(i)
			start := time.Now()
			resp, err := e.handle(b.Context(), ev)
			lat = append(lat, time.Since(start))
			if err != nil || resp.StatusCode != status {
				b.Fatalf("%s %s = %d %s, %v; want %d", ev.HTTPMethod, ev.Path, resp.StatusCode, resp.Body, err, status)
			}
		}
		b.StopTimer()
		reportPercentiles(b, lat)
	}
	b.Run("create", func(b *testing.B) {
		run(b, func(i int) events.APIGatewayProxyRequest {
			body := fmt.Sprintf(`{"api":"bench","route":"*","subject":"new-%d-%d","limit":10,"period":"1s"}`, b.N, i)
			return event(admin.RouteCreateRule, nil, body)
		}, 201)
	})
	b.Run("get", func(b *testing.B) {
		run(b, func(i int) events.APIGatewayProxyRequest {
			return event(admin.RouteGetRule, idParam(ids[i%seeded]), "")
		}, 200)
	})
	b.Run("update", func(b *testing.B) {
		run(b, func(i int) events.APIGatewayProxyRequest {
			k := i % seeded
			body := fmt.Sprintf(`{"api":"bench%d","route":"GET /items/{id}","subject":"seed-%d","limit":%d,"period":"1m"}`, k%10, k, 100+i)
			ev := event(admin.RouteUpdateRule, idParam(ids[k]), body, "If-Match", strconv.Quote(strconv.FormatInt(versions[k], 10)))
			versions[k]++
			return ev
		}, 200)
	})
	b.Run("list", func(b *testing.B) {
		run(b, func(i int) events.APIGatewayProxyRequest {
			return withQuery(event(admin.RouteListRules, nil, ""), "api", "bench"+strconv.Itoa(i%10), "limit", "100")
		}, 200)
	})
}

// reportPercentiles reports the p50 and p99 of lat in milliseconds.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkSubjects measures GET /subjects/{subject}/limits and DELETE
// /subjects/{subject}/buckets against PostgreSQL holding 1,000, 10,000
// and 100,000 rules (bulk-loaded with COPY): one per subject across 10
// apis, plus 10 route rules for every subject (*). The time per call must
// not grow with the number of rules: the routes read the rules that may
// apply to the subject, by index, never the whole table.
func BenchmarkSubjects(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("rules="+strconv.Itoa(n), func(b *testing.B) {
			pool := pgtest.NewPool(b)
			ctx := b.Context()
			rows := make([][]any, 0, n+10)
			for i := range n {
				rows = append(rows, []any{"api" + strconv.Itoa(i%10), "*", "user-" + strconv.Itoa(i), int64(100), int64(60_000)})
			}
			for i := range 10 {
				rows = append(rows, []any{"api0", "GET /r" + strconv.Itoa(i), "*", int64(5), int64(1_000)})
			}
			cols := []string{"api", "route", "subject", "limit_count", "period_ms"}
			if _, err := pool.CopyFrom(ctx, pgx.Identifier{"rules"}, cols, pgx.CopyFromRows(rows)); err != nil {
				b.Fatalf("COPY %d rules: %v", len(rows), err)
			}
			if _, err := pool.Exec(ctx, "ANALYZE rules"); err != nil {
				b.Fatal(err)
			}
			rdb := testenv.Redis(b)
			prefix := testenv.Prefix(b, "admin")
			testenv.DeleteKeys(b, rdb, prefix)
			svc := admin.New(postgres.New(pool), nil, limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: 2 * time.Second}), admin.Options{})
			h := benchHandler(svc)
			for _, c := range []struct {
				name   string
				route  string
				query  []string
				status int
				rules  int // the rules the answer lists
			}{
				{"limits-api", admin.RouteSubjectLimits, []string{"api", "api0"}, 200, 11},
				{"limits-every-api", admin.RouteSubjectLimits, nil, 200, 11},
				{"reset-api", admin.RouteResetSubject, []string{"api", "api0"}, 204, 0},
			} {
				b.Run(c.name, func(b *testing.B) {
					lat := make([]time.Duration, 0, b.N)
					i := 0
					for b.Loop() {
						// A subject of api0 (user-0, user-10, ...), a new one each call.
						subject := "user-" + strconv.Itoa((i*10)%n)
						i++
						ev := withQuery(event(c.route, map[string]string{"subject": subject}, ""), c.query...)
						start := time.Now()
						resp, err := h(ctx, ev)
						lat = append(lat, time.Since(start))
						if err != nil || resp.StatusCode != c.status {
							b.Fatalf("%s %s = %d %s, %v; want %d", ev.HTTPMethod, ev.Path, resp.StatusCode, resp.Body, err, c.status)
						}
						if c.rules > 0 {
							if got := strings.Count(resp.Body, `"rule":`); got != c.rules {
								b.Fatalf("%s lists %d rules, want %d: %s", ev.Path, got, c.rules, resp.Body)
							}
						}
					}
					reportPercentiles(b, lat)
				})
			}
		})
	}
}
