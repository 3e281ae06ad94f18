package admin_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
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
