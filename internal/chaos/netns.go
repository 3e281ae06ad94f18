package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Host is one machine of the harness: a Linux network namespace of its
// own with one interface, eth0, on the harness's private bridge.
type Host struct {
	// Name is the host's short name (r1, d2, load).
	Name string
	// NS is the namespace's name under /run/netns (<run>-<name>).
	NS string
	// IP is the address the harness gave eth0, inside its own subnet.
	IP string
}

// Subnet is the harness's private network. Nothing outside the namespaces
// the harness creates is ever on it: the root namespace has no interface
// there, so no packet of a run can leave the machine or reach the host's
// own services.
const Subnet = "10.99.0.0/24"

// The hosts of a run and the last byte of their addresses.
var hostAddrs = []struct {
	name string
	last int
}{
	{"ctl", 2},                         // the harness itself: admin writes, Sentinel and INFO queries
	{"r1", 11}, {"r2", 12}, {"r3", 13}, // Redis primary and replicas
	{"s1", 21}, {"s2", 22}, {"s3", 23}, // Sentinels
	{"pg", 31},                         // PostgreSQL
	{"d1", 41}, {"d2", 42}, {"d3", 43}, // decision processes
	{"load", 51}, // the load client
	// The multi-Region topology of the global scenarios (global.go):
	// Region i's Redis gi-r and decision processes gi-d1, gi-d2, and the
	// ledger host (dynalite behind a ledgerproxy per Region).
	{"g1r", 61}, {"g1d1", 62}, {"g1d2", 63},
	{"g2r", 71}, {"g2d1", 72}, {"g2d2", 73},
	{"g3r", 81}, {"g3d1", 82}, {"g3d2", 83},
	{"led", 91},
}

// nsPrefix starts the name of every namespace a harness creates:
// "slch<pid>-", so a later run can tell a dead run's leftovers from a live
// one's.
const nsPrefix = "slch"

var nsName = regexp.MustCompile(`^` + nsPrefix + `([0-9]+)-[a-z0-9]+$`)

// Net is the harness's network: a hub namespace holding a bridge, and one
// namespace per host, each joined to the bridge by a veth pair. Close
// removes every namespace (and with them the veths, qdiscs and iptables
// rules inside).
type Net struct {
	run     string // "slch<pid>"
	hub     string // the bridge's namespace
	hosts   map[string]*Host
	created []string // namespaces, in creation order
}

// ErrNoNamespaces is returned by NewNet when the kernel refuses to create
// a network namespace (not root, no CAP_SYS_ADMIN, a sandbox).
var ErrNoNamespaces = errors.New("chaos: cannot create network namespaces")

// NewNet sweeps the namespaces of harness runs whose process is gone, then
// creates this run's: the hub with its bridge, and every host. On error it
// removes what it made.
func NewNet(ctx context.Context) (n *Net, err error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("%w: the ip command (iproute2) is not installed", ErrNoNamespaces)
	}
	Sweep(ctx)
	run := nsPrefix + strconv.Itoa(os.Getpid())
	n = &Net{run: run, hub: run + "-hub", hosts: map[string]*Host{}}
	defer func() {
		if err != nil {
			n.Close()
			n = nil
		}
	}()
	if out, err := ipCmd(ctx, "netns", "add", n.hub); err != nil {
		return nil, fmt.Errorf("%w: ip netns add: %v: %s", ErrNoNamespaces, err, bytes.TrimSpace(out))
	}
	n.created = append(n.created, n.hub)
	steps := [][]string{
		{"-n", n.hub, "link", "set", "lo", "up"},
		{"-n", n.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", n.hub, "link", "set", "br0", "up"},
	}
	for _, h := range hostAddrs {
		host := &Host{Name: h.name, NS: run + "-" + h.name, IP: "10.99.0." + strconv.Itoa(h.last)}
		n.hosts[h.name] = host
		if out, err := ipCmd(ctx, "netns", "add", host.NS); err != nil {
			return nil, fmt.Errorf("ip netns add %s: %v: %s", host.NS, err, out)
		}
		n.created = append(n.created, host.NS)
		veth := "v" + h.name
		steps = append(steps,
			[]string{"-n", n.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.NS},
			[]string{"-n", n.hub, "link", "set", veth, "master", "br0", "up"},
			[]string{"-n", host.NS, "link", "set", "lo", "up"},
			[]string{"-n", host.NS, "addr", "add", host.IP + "/24", "dev", "eth0"},
			[]string{"-n", host.NS, "link", "set", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if out, err := ipCmd(ctx, s...); err != nil {
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return n, nil
}

// Host returns the named host; it panics on a name that is not one of the
// harness's (a bug in a scenario).
func (n *Net) Host(name string) *Host {
	h, ok := n.hosts[name]
	if !ok {
		panic("chaos: no host " + name)
	}
	return h
}

// Close deletes every namespace of the run, newest first. Processes still
// inside must be stopped first (Procs.StopAll): a namespace lives on while
// a process holds it, only its name goes.
func (n *Net) Close() {
	if n == nil {
		return
	}
	for _, ns := range slices.Backward(n.created) {
		deleteNS(ns)
	}
	n.created = nil
}

// deleteNS kills whatever still runs in ns (only a harness's processes
// can: its name is a harness's) and deletes it.
func deleteNS(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := ipCmd(ctx, "netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_, _ = ipCmd(ctx, "netns", "del", ns)
}

// Sweep deletes the namespaces a harness run left behind when it died
// without tearing down (SIGKILL, a test binary's timeout): those named
// slch<pid>-… whose pid no longer runs, with any process still inside.
func Sweep(ctx context.Context) {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		m := nsName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue // a live run's (or ours)
		}
		deleteNS(e.Name())
	}
}

func ipCmd(ctx context.Context, args ...string) ([]byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// Exec runs a command inside host's namespace and returns its combined
// output (tc, iptables).
func (n *Net) Exec(ctx context.Context, host, name string, args ...string) ([]byte, error) {
	out, err := ipCmd(ctx, append([]string{"netns", "exec", n.Host(host).NS, name}, args...)...)
	if err != nil {
		return out, fmt.Errorf("%s %s on %s: %w: %s", name, strings.Join(args, " "), host, err, bytes.TrimSpace(out))
	}
	return out, nil
}

// DialContext dials addr from inside host's namespace: the socket is
// created on an OS thread moved into the namespace, and stays there after
// the thread moves back. The harness's own clients (admin writes, Sentinel
// queries) dial from the ctl host this way, so the root namespace needs no
// interface on the harness's network.
func (n *Net) DialContext(ctx context.Context, host, network, addr string) (net.Conn, error) {
	ns := n.Host(host).NS
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		c, err, back := dialIn(ctx, ns, network, addr)
		if back {
			runtime.UnlockOSThread()
		} // else the thread stays locked and exits with this goroutine
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialIn runs on a locked thread: it enters ns, dials, and returns to the
// thread's own namespace; back reports whether it did.
func dialIn(ctx context.Context, ns, network, addr string) (c net.Conn, err error, back bool) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", err), true
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns, err), true
	}
	defer target.Close()
	if err := setns(target); err != nil {
		return nil, fmt.Errorf("enter namespace %s: %w", ns, err), true
	}
	c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
	if serr := setns(self); serr != nil {
		if c != nil {
			c.Close()
		}
		return nil, fmt.Errorf("leave namespace %s: %w", ns, serr), false
	}
	return c, err, true
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// IPs returns the addresses of the named hosts.
func (n *Net) IPs(names ...string) []string {
	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, n.Host(name).IP)
	}
	return slices.Clip(out)
}
