package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisServer is a private redis-server a test started on a free loopback
// port, for the tests that kill, restart or slow a server: they never touch
// the shared one. It runs without persistence, so a restart starts empty.
type RedisServer struct {
	// Addr is the server's host:port; it stays the same across Restart.
	Addr string
	// Dir is the server's working directory (its log, its config file).
	Dir string

	bin  string
	args []string
	proc Process
}

// StartRedis starts a redis-server on a free loopback port (whose cluster
// bus port, +10000, is free too) with args added to its command line, and
// returns once it answers PING. In args, $PORT stands for the port and $DIR
// for the server's directory. The server reads an empty config file first,
// which Sentinel needs (it rewrites it): pass "--sentinel" and "--sentinel",
// "monitor", … to start one. The server is killed, by pid, when the test ends.
//
// Like every integration test it needs SLUICE_TEST_REDIS_URL (see Lookup),
// and redis-server on the PATH: missing, the test skips, or fails under
// SLUICE_REQUIRE_INTEGRATION=1.
func StartRedis(tb testing.TB, args ...string) *RedisServer {
	tb.Helper()
	return startRedisOn(tb, FreePorts(tb, 1, 10000)[0], args...)
}

func startRedisOn(tb testing.TB, p int, args ...string) *RedisServer {
	tb.Helper()
	RedisURL(tb)
	bin := Binary(tb, "redis-server")
	port := strconv.Itoa(p)
	dir := tb.TempDir()
	conf := filepath.Join(dir, "redis.conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		tb.Fatalf("testenv: write %s: %v", conf, err)
	}
	full := append([]string{conf,
		"--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--enable-debug-command", "local",
		// A replica syncs at once instead of after the default 5s wait.
		"--repl-diskless-sync-delay", "0",
		"--logfile", filepath.Join(dir, "redis.log"),
	}, args...)
	for i, a := range full {
		full[i] = strings.NewReplacer("$PORT", port, "$DIR", dir).Replace(a)
	}
	s := &RedisServer{Addr: "127.0.0.1:" + port, Dir: dir, bin: bin, args: full}
	tb.Cleanup(s.Kill)
	s.start(tb)
	return s
}

func (s *RedisServer) start(tb testing.TB) {
	tb.Helper()
	s.proc.Start(tb, exec.Command(s.bin, s.args...), "")
	WaitRedis(tb, s.Addr, "PING", func(r string) bool { return r == "PONG" })
}

// Kill kills the server with SIGKILL, as a crash or a lost node would end
// it, and waits for it to exit. It is a no-op when the server is stopped.
func (s *RedisServer) Kill() { s.proc.Stop(syscall.SIGKILL, 0, time.Minute) }

// Pause stops the server with SIGSTOP, as a stalled node is stopped (a
// long fork, a swapped-out or descheduled VM): it reads and answers
// nothing, and what is sent to it waits in the kernel's buffers and then
// in its peers' memory, until Resume. It is a no-op when the server is
// stopped; Kill ends a paused server too.
func (s *RedisServer) Pause(tb testing.TB) { s.proc.Signal(tb, syscall.SIGSTOP) }

// Resume continues a server Pause stopped.
func (s *RedisServer) Resume(tb testing.TB) { s.proc.Signal(tb, syscall.SIGCONT) }

// Restart kills the server if it runs and starts it again on the same
// address, empty (nothing is persisted), and returns once it answers PING.
func (s *RedisServer) Restart(tb testing.TB) {
	tb.Helper()
	s.Kill()
	s.start(tb)
}

// Log returns the server's log file so far, for failure messages.
func (s *RedisServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
	return string(b)
}

// StartCluster starts a private Redis Cluster of n masters (no replicas)
// with redis-cli --cluster create, and returns its servers once every node
// reports cluster_state:ok.
func StartCluster(tb testing.TB, n int) []*RedisServer {
	tb.Helper()
	servers := make([]*RedisServer, n)
	addrs := make([]string, n)
	for i := range servers {
		servers[i] = StartRedis(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes-$PORT.conf")
		addrs[i] = servers[i].Addr
	}
	cli := Binary(tb, "redis-cli")
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...)
	if out, err := create.CombinedOutput(); err != nil {
		tb.Fatalf("testenv: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		WaitRedis(tb, a, "CLUSTER INFO", func(s string) bool { return strings.Contains(s, "cluster_state:ok") })
	}
	return servers
}

// StartSentinel starts a replica of primary and n sentinels (n >= 1)
// watching primary under name with a quorum of n/2+1, tuned to fail over
// fast: the primary is down after 200ms without a reply. It returns the
// replica and the sentinels once every sentinel knows the replica and the
// other sentinels, so a failover can start as soon as the primary dies.
func StartSentinel(tb testing.TB, primary *RedisServer, name string, n int) (replica *RedisServer, sentinels []*RedisServer) {
	tb.Helper()
	host, port, err := net.SplitHostPort(primary.Addr)
	if err != nil {
		tb.Fatalf("testenv: primary address %q: %v", primary.Addr, err)
	}
	replica = StartRedis(tb, "--replicaof", host, port)
	WaitRedis(tb, replica.Addr, "INFO replication", func(s string) bool { return strings.Contains(s, "master_link_status:up") })
	quorum := strconv.Itoa(n/2 + 1)
	// Each sentinel is told the others (ids and ports chosen here): found
	// through hello messages instead, they take seconds to meet.
	ports := FreePorts(tb, n, 0)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = Random(tb) + Random(tb) + Random(tb) + Random(tb)[:4] // 40 hex digits
	}
	for i := range n {
		args := []string{"--sentinel",
			"--sentinel", "myid", ids[i],
			"--sentinel", "monitor", name, host, port, quorum,
			"--sentinel", "down-after-milliseconds", name, "200",
			"--sentinel", "failover-timeout", name, "2000"}
		for j := range n {
			if j != i {
				args = append(args, "--sentinel", "known-sentinel", name, "127.0.0.1", strconv.Itoa(ports[j]), ids[j])
			}
		}
		sentinels = append(sentinels, startRedisOn(tb, ports[i], args...))
	}
	for _, s := range sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, Protocol: 2})
		var last map[string]string
		ok := false
		for end := time.Now().Add(15 * time.Second); time.Now().Before(end) && !ok; time.Sleep(50 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			last, err = c.Master(ctx, name).Result()
			cancel()
			ok = err == nil && last["num-other-sentinels"] == strconv.Itoa(n-1) && last["num-slaves"] == "1"
		}
		_ = c.Close()
		if !ok {
			tb.Fatalf("testenv: sentinel %s does not see the replica and %d other sentinels: %v %v\n%s", s.Addr, n-1, last, err, s.Log())
		}
	}
	return replica, sentinels
}

// Binary returns the path of the named program. When it is not on the
// PATH the test is skipped, or failed under SLUICE_REQUIRE_INTEGRATION=1.
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(RequireVar) == "1" {
			tb.Fatalf("testenv: %s not found and %s=1: %v", name, RequireVar, err)
		}
		tb.Skipf("testenv: %s not found: %v", name, err)
	}
	return p
}

// FreePorts returns n distinct loopback ports that are free now, each with
// port+offset free too (a cluster bus port; offset 0 for none).
func FreePorts(tb testing.TB, n, offset int) []int {
	tb.Helper()
	var ports []int
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		p := 20000 + rand.IntN(20000)
		if free(p) && (offset == 0 || free(p+offset)) && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) < n {
		tb.Fatalf("testenv: found only %d free ports of %d", len(ports), n)
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

// WaitRedis sends command (words split on spaces) to addr every 50ms until
// ok accepts its reply as text, and fails the test after 15s.
func WaitRedis(tb testing.TB, addr, command string, ok func(string) bool) {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, Protocol: 2})
	defer c.Close()
	var args []any
	for _, f := range strings.Fields(command) {
		args = append(args, f)
	}
	var last string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		v, err := c.Do(ctx, args...).Text()
		cancel()
		if err == nil && ok(v) {
			return
		}
		last = fmt.Sprint(v, " ", err)
	}
	tb.Fatalf("testenv: %s on %s: last reply %q", command, addr, last)
}
