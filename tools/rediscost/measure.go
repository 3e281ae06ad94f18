package main

// What every measurement shares: a private redis-server, whose counters
// no other client moves, Redis's own counters (INFO cpu, INFO
// commandstats), a closed-loop driver and the summaries of per-round
// figures.

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// startRedis starts redis-server from the PATH on a free loopback port,
// persisting nothing, and returns its address once it answers PING, and a
// function that kills it and removes its directory.
func startRedis(ctx context.Context) (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("find a free port: %w", err)
	}
	addr = l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "redis-measure-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("start redis-server: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err = c.Ping(ctx).Err(); err == nil {
			return addr, stop, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s does not answer: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond) // the server is starting
	}
}

// redisCPU returns the server's used_cpu_user + used_cpu_sys (INFO cpu), in
// seconds: the difference of two readings is what it spent between them,
// networking included.
func redisCPU(ctx context.Context, c *redis.Client) (float64, error) {
	info, err := c.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var sum float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO cpu %s: %w", line, err)
			}
			sum += f
		}
	}
	return sum, nil
}

// cmdStat is one command's line of INFO commandstats: its calls and its
// microseconds per call.
type cmdStat struct{ Calls, Usec float64 }

// commandStats returns INFO commandstats by lowercase command name.
func commandStats(ctx context.Context, c *redis.Client) (map[string]cmdStat, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats: %w", err)
	}
	out := map[string]cmdStat{}
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		var s cmdStat
		for kv := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				s.Calls = f
			case "usec_per_call":
				s.Usec = f
			}
		}
		out[name] = s
	}
	return out, nil
}

// drive runs op n times from callers goroutines, i = 0..n-1, and returns
// the first error, after which no op starts.
func drive(ctx context.Context, callers, n int, op func(ctx context.Context, i int) error) error {
	var (
		next  atomic.Int64
		first atomic.Value
		wg    sync.WaitGroup
	)
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := op(ctx, i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return err
}

// quartiles formats p25 / median / p75 of xs (sorted in place).
func quartiles(xs []float64) string {
	slices.Sort(xs)
	n := len(xs)
	return strconv.FormatFloat(xs[n/4], 'f', 3, 64) + " / " + strconv.FormatFloat(xs[n/2], 'f', 3, 64) + " / " + strconv.FormatFloat(xs[3*n/4], 'f', 3, 64)
}

// spread formats the median of xs by f, with its range.
func spread[T any](xs []T, f func(T) float64) string {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf("%.3g (%.3g–%.3g)", med, v[0], v[len(v)-1])
}
