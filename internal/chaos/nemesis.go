package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Nemesis injects the network faults: iptables rules and packet delayers
// inside the hosts' namespaces. Heal removes every one it added.
type Nemesis struct {
	c *Cluster

	mu       sync.Mutex
	rules    []iptRule // added, in order
	delayers []*Proc
	queue    int
}

type iptRule struct {
	host string
	spec []string // after -A/-D
}

// NewNemesis returns a Nemesis over c's hosts.
func NewNemesis(c *Cluster) *Nemesis { return &Nemesis{c: c, queue: 10} }

func (n *Nemesis) add(ctx context.Context, host string, spec ...string) error {
	if _, err := n.c.Net.Exec(ctx, host, "iptables", append([]string{"-w", "5", "-A"}, spec...)...); err != nil {
		return err
	}
	n.mu.Lock()
	n.rules = append(n.rules, iptRule{host, spec})
	n.mu.Unlock()
	return nil
}

// Partition drops every packet between host and each of peers, both ways
// (the rules live in host's namespace: the peers' own are untouched).
// TCP connections hang, as they do when a link is cut, rather than reset.
func (n *Nemesis) Partition(ctx context.Context, host string, peers ...string) error {
	return n.both(ctx, host, peers, "-j", "DROP")
}

// Loss drops each packet between host and peers with probability p, in
// each direction (iptables' statistic match).
func (n *Nemesis) Loss(ctx context.Context, host string, p float64, peers ...string) error {
	return n.both(ctx, host, peers, "-m", "statistic", "--mode", "random", "--probability", strconv.FormatFloat(p, 'f', 3, 64), "-j", "DROP")
}

// both adds, in host's namespace, the rule rest for the packets host sends
// to each of peers and for those it gets from them.
func (n *Nemesis) both(ctx context.Context, host string, peers []string, rest ...string) error {
	for _, ip := range n.c.Net.IPs(peers...) {
		if err := n.add(ctx, host, append([]string{"OUTPUT", "-d", ip}, rest...)...); err != nil {
			return err
		}
		if err := n.add(ctx, host, append([]string{"INPUT", "-s", ip}, rest...)...); err != nil {
			return err
		}
	}
	return nil
}

// Delay adds d to every packet host sends to peers, which adds d to every
// round trip between them: a delayer (the nfqdelay role, see nfqueue.go)
// holds the packets the NFQUEUE rule hands it.
func (n *Nemesis) Delay(ctx context.Context, host string, d time.Duration, peers ...string) error {
	n.mu.Lock()
	n.queue++
	q := strconv.Itoa(n.queue)
	n.mu.Unlock()
	p, err := n.c.Procs.Start(host, host+"-nfqdelay-"+q, []string{roleVar + "=" + roleDelay, delayQueueVar + "=" + q, delayVar + "=" + d.String()}, n.c.bins.Self)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.delayers = append(n.delayers, p)
	n.mu.Unlock()
	// Bound before the rule goes in (the rule bypasses the queue while
	// nothing listens, so an early rule would only delay nothing).
	err = poll(ctx, 5*time.Second, 20*time.Millisecond, p, func() error {
		if strings.Contains(p.Tail(4096), "bound") {
			return nil
		}
		return fmt.Errorf("nfqdelay on %s did not bind its queue\n%s", host, p.Tail(1000))
	})
	if err != nil {
		return err
	}
	for _, ip := range n.c.Net.IPs(peers...) {
		if err := n.add(ctx, host, "OUTPUT", "-d", ip, "-j", "NFQUEUE", "--queue-num", q, "--queue-bypass"); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every rule the nemesis added, newest first, then stops the
// delayers (which let what they hold go at once).
func (n *Nemesis) Heal(ctx context.Context) error {
	n.mu.Lock()
	rules, delayers := n.rules, n.delayers
	n.rules, n.delayers = nil, nil
	n.mu.Unlock()
	var errs []error
	for _, r := range slices.Backward(rules) {
		if _, err := n.c.Net.Exec(ctx, r.host, "iptables", append([]string{"-w", "5", "-D"}, r.spec...)...); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range delayers {
		p.Stop(syscall.SIGTERM, 2*time.Second)
	}
	n.c.Procs.forget()
	return errors.Join(errs...)
}
