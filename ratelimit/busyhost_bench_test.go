package ratelimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// failOpens counts the decisions that failed open.
type failOpens struct{ n, all atomic.Int64 }

func (f *failOpens) ObserveDecision(d ratelimit.Decision) {
	f.all.Add(1)
	if d.FailOpen {
		f.n.Add(1)
	}
}

// burnCPU starts n processes that spin on a core each until the benchmark
// ends: a host busy with other work, as a traffic spike finds it. Each is
// stopped by its pid.
func burnCPU(b *testing.B, n int) {
	for range n {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // it may have gone
			cmd.Wait()                          //nolint:errcheck // killed
		})
	}
}

// BenchmarkServiceBusyHost is examples/service as a team runs it: the
// Limiter with its defaults (ratelimit.FromEnv, outside Lambda), the
// middleware around a ServeMux behind a real HTTP server, 64 concurrent
// callers over loopback, each a subject of its own, and four CPU-bound
// processes competing for the machine's cores. It reports the share of
// decisions that failed open (failopen-%), beside the same run with the
// Lambda's tuning (25 ms, 4 connections), which services used to get
// (its LeaseMax and the rest are the defaults in both).
//
//	scripts/testenv.sh go test -run '^$' -bench ServiceBusyHost -benchtime 20000x -count 3 ./ratelimit/
func BenchmarkServiceBusyHost(b *testing.B) {
	for _, tt := range []struct {
		name          string
		timeout       time.Duration
		pool, callers int
	}{
		{"service-defaults", 0, 0, 64},
		{"lambda-tuning", ratelimit.LambdaTimeout, ratelimit.LambdaPoolSize, 64},
	} {
		b.Run(tt.name, func(b *testing.B) {
			// examples/service's settings: its defaults but for the log
			// and metric lines, kept out of the benchmark's output.
			rl, err := ratelimit.New(context.Background(), ratelimit.Options{
				RedisURL: os.Getenv("REDIS_URL"), Prefix: os.Getenv("REDIS_PREFIX") + "busy:", SubjectKey: "busy-host-subject-key",
				Sources: "header:x-api-key", DefaultLimit: "1000000000/1s", Timeout: tt.timeout, PoolSize: tt.pool, Out: io.Discard,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer rl.Close()
			var fo failOpens
			mux := http.NewServeMux()
			mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, `{"order":"`+r.PathValue("id")+`"}`) //nolint:errcheck // the client has gone
			})
			srv := httptest.NewServer(rl.Handler(mux, ratelimit.HandlerOptions{API: "orders", Observer: &fo}))
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			burnCPU(b, 4)
			callers := tt.callers
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := range callers {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						req, _ := http.NewRequest("GET", srv.URL+"/orders/42", nil)
						req.Header.Set("X-Api-Key", fmt.Sprintf("caller-%d-%d", c, i%500))
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body) //nolint:errcheck // drained for reuse
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if all := fo.all.Load(); all > 0 {
				b.ReportMetric(100*float64(fo.n.Load())/float64(all), "failopen-%")
			}
		})
	}
}
