package limiter

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startServers starts n private redis-servers on free loopback ports (with
// extra flags) and returns their addresses once they answer; they are
// killed (by pid) when the test ends.
func startServers(t *testing.T, n int, extra ...string) []string {
	t.Helper()
	redisURL(t) // same gate as every integration test
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found: %v", err)
	}
	dir := t.TempDir()
	var addrs []string
	for _, port := range clusterPorts(t, n) {
		p := strconv.Itoa(port)
		args := append([]string{
			"--port", p, "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no",
			"--logfile", filepath.Join(dir, "redis-"+p+".log"),
		}, extra...)
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "$PORT", p)
		}
		cmd := exec.Command(server, args...)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server on %s: %v", p, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		addrs = append(addrs, "127.0.0.1:"+p)
	}
	for _, a := range addrs {
		waitFor(t, a, "PING", func(s string) bool { return s == "PONG" })
	}
	return addrs
}

// startCluster starts a private 3-master Redis Cluster and returns its
// addresses.
func startCluster(t *testing.T) []string {
	t.Helper()
	addrs := startServers(t, 3, "--cluster-enabled", "yes", "--cluster-config-file", "nodes-$PORT.conf")
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found: %v", err)
	}
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		waitFor(t, a, "CLUSTER INFO", func(s string) bool { return strings.Contains(s, "cluster_state:ok") })
	}
	return addrs
}

// clusterPorts picks n free ports whose cluster bus ports (+10000) are free
// too.
func clusterPorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		p := 20000 + rand.IntN(20000)
		if free(p) && free(p+10000) {
			ports = append(ports, p)
		}
	}
	if len(ports) < n {
		t.Fatalf("found only %d free port pairs", len(ports))
	}
	return ports
}

func free(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// waitFor polls addr with a command until ok accepts its reply.
func waitFor(t *testing.T, addr, command string, ok func(string) bool) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	var last string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		args := make([]any, 0, 2)
		for _, f := range strings.Fields(command) {
			args = append(args, f)
		}
		v, err := c.Do(context.Background(), args...).Text()
		if err == nil && ok(v) {
			return
		}
		last = fmt.Sprint(v, err)
	}
	t.Fatalf("%s on %s: last reply %q", command, addr, last)
}

func TestCluster(t *testing.T) {
	addrs := startCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	l := New(c, Options{Prefix: "t:sl:", Timeout: time.Second})
	ctx := context.Background()
	bs := []Bucket{
		{ID: "api", Limit: 5, Period: time.Hour},
		{ID: "route", Limit: 3, Period: time.Hour},
		{ID: "shadow", Limit: 1, Period: time.Hour, Shadow: true},
	}
	const subjects = 20
	for i := range subjects {
		sub := "cluster-" + strconv.Itoa(i)
		for n := int64(1); n <= 4; n++ {
			d, err := l.Allow(ctx, Request{Subject: sub, Buckets: bs, Cost: 1})
			if err != nil {
				t.Fatalf("Allow(%s) #%d: %v", sub, n, err)
			}
			wantAllowed, wantMask := n <= 3, uint8(0)
			if n >= 2 {
				wantMask = 0b100
			}
			if d.Allowed != wantAllowed || d.Bucket != 1 || d.ShadowDenied != wantMask {
				t.Errorf("Allow(%s) #%d = %+v, want allowed %v by bucket 1, shadow mask %b", sub, n, d, wantAllowed, wantMask)
			}
		}
		st, err := l.Peek(ctx, sub, bs)
		if err != nil {
			t.Fatalf("Peek(%s): %v", sub, err)
		}
		if st[0].Remaining != 2 || st[1].Remaining != 0 || st[2].Remaining != 0 {
			t.Errorf("Peek(%s) = %+v, want 2, 0, 0 left", sub, st)
		}
		if err := l.Reset(ctx, sub, bs); err != nil {
			t.Fatalf("Reset(%s): %v", sub, err)
		}
		if st, err := l.Peek(ctx, sub, bs); err != nil || st[0].Remaining != 5 {
			t.Errorf("Peek(%s) after Reset = %+v, %v, want full", sub, st, err)
		}
		if _, err := l.Allow(ctx, Request{Subject: sub, Buckets: bs, Cost: 1}); err != nil {
			t.Fatalf("Allow(%s) after Reset: %v", sub, err)
		}
	}
	// The subjects spread over the masters.
	var used atomic.Int32
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if n > 0 {
			used.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	if used.Load() < 2 {
		t.Errorf("keys on %d masters, want them spread over at least 2", used.Load())
	}
	if s := l.Stats(); s.Errors != 0 {
		t.Errorf("Stats().Errors = %d, want 0", s.Errors)
	}
}
