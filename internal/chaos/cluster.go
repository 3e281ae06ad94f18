package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The hosts by role.
var (
	redisHosts    = []string{"r1", "r2", "r3"}
	sentinelHosts = []string{"s1", "s2", "s3"}
	decideHosts   = []string{"d1", "d2", "d3"}
)

// Ports inside the hosts (each host has its own address, so they repeat).
const (
	redisPort    = 6379
	sentinelPort = 26379
	pgPort       = 5432
	decidePort   = 8080
	masterName   = "chaos"
)

// SubjectKey is the subject-hash key every decision process shares, as
// the Lambdas of one deployment share theirs.
const SubjectKey = "chaos-harness-subject-key-0123456789"

// RedisOptions configure the Redis tier of one scenario.
type RedisOptions struct {
	// DownAfter is Sentinel's down-after-milliseconds: how long the
	// primary may not answer before it is subjectively down.
	DownAfter time.Duration
	// MinReplicas, when > 0, sets min-replicas-to-write on every data
	// node, with MinReplicasMaxLag as min-replicas-max-lag: a primary
	// that has not heard from that many replicas for the lag refuses
	// writes (what bounds a split brain).
	MinReplicas       int
	MinReplicasMaxLag time.Duration
}

// Binaries are the programs the cluster runs.
type Binaries struct {
	// Self is the harness's own executable, re-run for the decide, load
	// and nfqdelay roles (Role).
	Self string
	// RedisServer is redis-server (also run with --sentinel).
	RedisServer string
	// PGBin is PostgreSQL's bin directory (initdb, postgres).
	PGBin string
}

// FindBinaries locates redis-server and PostgreSQL, and takes self as the
// harness's executable.
func FindBinaries(self string) (Binaries, error) {
	b := Binaries{Self: self}
	var errs []error
	var err error
	if b.RedisServer, err = exec.LookPath("redis-server"); err != nil {
		errs = append(errs, fmt.Errorf("redis-server: %w", err))
	}
	for _, tool := range []string{"iptables", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", tool, err))
		}
	}
	// The last version (in Glob's lexical order) that has an initdb.
	if initdbs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb"); len(initdbs) > 0 {
		b.PGBin = filepath.Dir(initdbs[len(initdbs)-1])
	} else {
		errs = append(errs, errors.New("PostgreSQL: no /usr/lib/postgresql/*/bin/initdb"))
	}
	return b, errors.Join(errs...)
}

// Cluster is every server of a run: Redis, its Sentinels, PostgreSQL and
// the decision processes, each on its own host.
type Cluster struct {
	Net   *Net
	Procs *Procs
	bins  Binaries
	dir   string

	Redis     map[string]*Proc // r1..r3
	Sentinels map[string]*Proc // s1..s3
	Decide    map[string]*Proc // d1..d3, and g1d1..g3d2 in global scenarios
	// Ledger runs on the ledger host, beside dynalite, once a global
	// scenario has started them (StartLedger).
	Ledger *Proc

	http  *http.Client
	pgDir string // removed by Close
}

// NewCluster returns a Cluster on n writing under dir.
func NewCluster(n *Net, bins Binaries, dir string) *Cluster {
	c := &Cluster{Net: n, Procs: &Procs{net: n, dir: dir}, bins: bins, dir: dir,
		Redis: map[string]*Proc{}, Sentinels: map[string]*Proc{}, Decide: map[string]*Proc{}}
	c.http = &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:     c.ctlDial,
			MaxIdleConns:    8,
			IdleConnTimeout: 5 * time.Second,
		},
	}
	return c
}

// ctlDial dials from the ctl host.
func (c *Cluster) ctlDial(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.Net.DialContext(ctx, "ctl", network, addr)
}

// redisClient is a client of one Redis or Sentinel address, from ctl.
func (c *Cluster) redisClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Dialer: c.ctlDial, Protocol: 2, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, PoolSize: 2})
}

func hostAddr(h *Host, port int) string { return net.JoinHostPort(h.IP, strconv.Itoa(port)) }

// StartPostgres creates a database cluster (as the postgres user: initdb
// refuses root) and runs it on the pg host, trusting the harness's subnet.
func (c *Cluster) StartPostgres(ctx context.Context) error {
	// Its own temporary directory: the postgres user must reach it, and
	// the run's directory may sit under one only root can enter.
	pgdir, err := os.MkdirTemp("", "sluice-chaos-pg-")
	if err != nil {
		return err
	}
	c.pgDir = pgdir
	if err := os.Chmod(pgdir, 0o755); err != nil {
		return err
	}
	var cred *syscall.Credential
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(pgdir, uid, gid); err != nil { // still empty
			return err
		}
	}
	data := filepath.Join(pgdir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(c.bins.PGBin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(hba, "host all all %s trust\n", Subnet)
	hba.Close()
	if err != nil {
		return err
	}
	args := []string{}
	if cred != nil {
		// setpriv execs in place, so the pid stays the postmaster's.
		args = append(args, "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups")
	}
	args = append(args, filepath.Join(c.bins.PGBin, "postgres"), "-D", data, "-p", strconv.Itoa(pgPort), "-k", pgdir,
		"-c", "listen_addresses="+c.Net.Host("pg").IP, "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=100")
	p, err := c.Procs.Start("pg", "pg-postgres", nil, args[0], args[1:]...)
	if err != nil {
		return err
	}
	return c.waitTCP(ctx, hostAddr(c.Net.Host("pg"), pgPort), p, 30*time.Second)
}

// waitTCP waits until addr accepts a connection from ctl.
func (c *Cluster) waitTCP(ctx context.Context, addr string, p *Proc, within time.Duration) error {
	return poll(ctx, within, 100*time.Millisecond, p, func() error {
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		conn, err := c.ctlDial(dctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("%s does not accept connections after %v: %w", addr, within, err)
		}
		return conn.Close()
	})
}

// poll calls try every interval until it returns nil, p (when not nil)
// exits, ctx ends or within passes; it returns nil once try did, else why
// it stopped: p's exit with its log's tail, or try's last error.
func poll(ctx context.Context, within, every time.Duration, p *Proc, try func() error) error {
	end := time.Now().Add(within)
	for {
		err := try()
		switch {
		case err == nil:
			return nil
		case p != nil && p.Exited():
			return fmt.Errorf("%s exited: %v\n%s", p.Name, p.Err(), p.Tail(3000))
		case time.Now().After(end) || ctx.Err() != nil:
			return err
		}
		time.Sleep(every)
	}
}

// StartRedis starts a fresh Redis tier: r1 primary, r2 and r3 its
// replicas, s1..s3 Sentinels watching r1 (quorum 2), and returns once
// every Sentinel knows both replicas and the two other Sentinels. Nothing
// is persisted: every scenario starts empty.
func (c *Cluster) StartRedis(ctx context.Context, o RedisOptions) error {
	primary := c.Net.Host("r1")
	for _, h := range redisHosts {
		args := []string{"--repl-diskless-sync-delay", "0"}
		if o.MinReplicas > 0 {
			args = append(args, "--min-replicas-to-write", strconv.Itoa(o.MinReplicas),
				"--min-replicas-max-lag", strconv.Itoa(int(o.MinReplicasMaxLag/time.Second)))
		}
		if h != "r1" {
			args = append(args, "--replicaof", primary.IP, strconv.Itoa(redisPort))
		}
		p, err := c.startRedisServer(h, "redis", redisPort, args...)
		if err != nil {
			return err
		}
		c.Redis[h] = p
	}
	for _, h := range redisHosts[1:] {
		if err := c.waitRedis(ctx, hostAddr(c.Net.Host(h), redisPort), c.Redis[h], "master_link_status:up", "INFO", "replication"); err != nil {
			return err
		}
	}
	ids := map[string]string{"s1": strings.Repeat("1", 40), "s2": strings.Repeat("2", 40), "s3": strings.Repeat("3", 40)}
	for _, h := range sentinelHosts {
		args := []string{"--sentinel",
			"--sentinel", "myid", ids[h],
			"--sentinel", "monitor", masterName, primary.IP, strconv.Itoa(redisPort), "2",
			"--sentinel", "down-after-milliseconds", masterName, strconv.Itoa(int(o.DownAfter / time.Millisecond)),
			"--sentinel", "failover-timeout", masterName, "10000",
			"--sentinel", "parallel-syncs", masterName, "2"}
		for _, r := range redisHosts[1:] {
			args = append(args, "--sentinel", "known-replica", masterName, c.Net.Host(r).IP, strconv.Itoa(redisPort))
		}
		for _, o := range sentinelHosts {
			if o != h {
				args = append(args, "--sentinel", "known-sentinel", masterName, c.Net.Host(o).IP, strconv.Itoa(sentinelPort), ids[o])
			}
		}
		p, err := c.startRedisServer(h, "sentinel", sentinelPort, args...)
		if err != nil {
			return err
		}
		c.Sentinels[h] = p
	}
	for _, h := range sentinelHosts {
		if err := c.waitSentinel(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// startRedisServer starts redis-server on host h as kind ("redis", or
// "sentinel" with --sentinel in args) on port, in a fresh directory with
// an empty config file (Sentinel rewrites it), nothing persisted, then
// args.
func (c *Cluster) startRedisServer(h, kind string, port int, args ...string) (*Proc, error) {
	dir := filepath.Join(c.dir, kind+"-"+h)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, kind+".conf")
	if err := os.WriteFile(conf, nil, 0o644); err != nil {
		return nil, err
	}
	args = append([]string{conf, "--port", strconv.Itoa(port), "--bind", c.Net.Host(h).IP, "--protected-mode", "no",
		"--dir", dir, "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", filepath.Join(dir, kind+".log")}, args...)
	return c.Procs.Start(h, h+"-"+kind, nil, c.bins.RedisServer, args...)
}

// waitRedis sends cmd to addr until its reply contains want.
func (c *Cluster) waitRedis(ctx context.Context, addr string, p *Proc, want string, cmd ...any) error {
	rc := c.redisClient(addr)
	defer rc.Close()
	return poll(ctx, 30*time.Second, 100*time.Millisecond, p, func() error {
		v, err := rc.Do(ctx, cmd...).Text()
		if err == nil && strings.Contains(v, want) {
			return nil
		}
		return fmt.Errorf("%s: %v never answered %q (last %q)", addr, cmd, want, fmt.Sprint(v, err))
	})
}

// waitSentinel waits until Sentinel h sees the primary with 2 replicas and
// 2 other Sentinels.
func (c *Cluster) waitSentinel(ctx context.Context, h string) error {
	sc := c.sentinelClient(h, time.Second)
	defer sc.Close()
	return poll(ctx, 30*time.Second, 100*time.Millisecond, c.Sentinels[h], func() error {
		m, err := sc.Master(ctx, masterName).Result()
		if err == nil && m["num-slaves"] == "2" && m["num-other-sentinels"] == "2" && m["flags"] == "master" {
			return nil
		}
		return fmt.Errorf("sentinel %s: not ready: %v %v\n%s", h, m, err, c.Sentinels[h].Tail(2000))
	})
}

// sentinelClient is a client of Sentinel h, from ctl, each call bounded by
// timeout.
func (c *Cluster) sentinelClient(h string, timeout time.Duration) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: hostAddr(c.Net.Host(h), sentinelPort), Dialer: c.ctlDial, Protocol: 2,
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1})
}

// SentinelMaster returns the host the majority of reachable Sentinels name
// as the primary ("" when none answers).
func (c *Cluster) SentinelMaster(ctx context.Context) string {
	votes := map[string]int{}
	for _, h := range sentinelHosts {
		sc := c.sentinelClient(h, 300*time.Millisecond)
		addr, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		sc.Close()
		if err == nil && len(addr) == 2 {
			for _, r := range redisHosts {
				if c.Net.Host(r).IP == addr[0] {
					votes[r]++
				}
			}
		}
	}
	if len(votes) == 0 {
		return ""
	}
	return slices.MaxFunc(slices.Collect(maps.Keys(votes)), func(a, b string) int { return cmp.Compare(votes[a], votes[b]) })
}

// StopRedis kills the Redis tier (data nodes and Sentinels).
func (c *Cluster) StopRedis() {
	for _, m := range []map[string]*Proc{c.Sentinels, c.Redis} {
		for h, p := range m {
			p.Kill()
			delete(m, h)
		}
	}
	c.Procs.forget()
}

// spawnDecide starts decision process h (not waiting for it), which reads
// the harness's configuration, then env over it (REDIS_URL, ...), as a
// Lambda reads its environment; migrate makes it migrate the database
// first. One goroutine at a time: it writes c.Decide.
func (c *Cluster) spawnDecide(h string, migrate bool, env map[string]string) error {
	all := map[string]string{
		"DATABASE_URL":       "postgres://postgres@" + hostAddr(c.Net.Host("pg"), pgPort) + "/postgres?sslmode=disable&connect_timeout=2",
		"SUBJECT_HMAC_KEY":   SubjectKey,
		"REDIS_POOL_SIZE":    "32",
		"LOG_LEVEL":          "warn",
		roleVar:              roleDecide,
		decideAddrVar:        hostAddr(c.Net.Host(h), decidePort),
		decideNameVar:        h,
		"RULES_VERSION_POLL": "1s",
	}
	if migrate {
		all[decideMigrateVar] = "1"
	}
	maps.Copy(all, env)
	var out []string
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	p, err := c.Procs.Start(h, h+"-decide", out, c.bins.Self)
	if err != nil {
		return err
	}
	c.Decide[h] = p
	return nil
}

// StartDecide starts the three decision processes on the Sentinel-watched
// Redis tier and waits until each answers its health check.
func (c *Cluster) StartDecide(ctx context.Context) error {
	var sentinels []string
	for _, s := range sentinelHosts {
		sentinels = append(sentinels, hostAddr(c.Net.Host(s), sentinelPort))
	}
	url := "redis://" + sentinels[0] + "/0?master_name=" + masterName + "&addr=" + sentinels[1] + "&addr=" + sentinels[2]
	for _, h := range decideHosts {
		if err := c.spawnDecide(h, h == "d1", map[string]string{"REDIS_MODE": "sentinel", "REDIS_URL": url}); err != nil {
			return err
		}
	}
	for _, h := range decideHosts {
		if err := c.waitHealthy(ctx, h, 60*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// StopDecide stops the decision processes (SIGTERM: leases go back).
func (c *Cluster) StopDecide() {
	for h, p := range c.Decide {
		p.Stop(syscall.SIGTERM, 5*time.Second)
		delete(c.Decide, h)
	}
	c.Procs.forget()
}

// waitHealthy waits until decision process h answers its health check.
func (c *Cluster) waitHealthy(ctx context.Context, h string, within time.Duration) error {
	return poll(ctx, within, 100*time.Millisecond, c.Decide[h], func() error {
		_, err := c.call(ctx, c.http, http.MethodGet, "http://"+hostAddr(c.Net.Host(h), decidePort)+"/healthz", nil, nil)
		if err != nil {
			return fmt.Errorf("%s not healthy after %v: %v\n%s", h, within, err, c.Decide[h].Tail(3000))
		}
		return nil
	})
}

// Admin sends one admin API request to host h (/admin/<path>) and decodes
// a JSON answer into out (when not nil). It returns the status.
func (c *Cluster) Admin(ctx context.Context, h, method, path string, body, out any) (int, error) {
	return c.call(ctx, c.http, method, "http://"+hostAddr(c.Net.Host(h), decidePort)+"/admin"+path, body, out)
}

// call sends one request from ctl with cl, body (when not nil) as JSON
// (a PUT matching any version), and decodes a JSON answer into out (when
// not nil); an answer of 300 or more is an error, with its body. It
// returns the status.
func (c *Cluster) call(ctx context.Context, cl *http.Client, method, url string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if method == http.MethodPut {
		req.Header.Set("If-Match", "*")
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode: %w", method, url, err)
		}
	}
	return resp.StatusCode, nil
}

// Close stops everything and deletes the namespaces.
func (c *Cluster) Close() {
	c.Procs.StopAll()
	c.http.CloseIdleConnections()
	if c.pgDir != "" {
		os.RemoveAll(c.pgDir)
	}
}
