package chaos

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"time"
)

// Scenario is one fault, injected under load.
type Scenario struct {
	// Name is the scenario's id (make chaos SCENARIOS=kill,split).
	Name string
	// Fault describes it in the table.
	Fault string
	// Redis configures the Redis tier it runs on.
	Redis RedisOptions
	// Load is how long the load runs; At is when the fault starts.
	Load, At time.Duration
	// Bounds are what it promises (docs/RELIABILITY.md).
	Bounds Bounds
	// Durable adds durable quotas (and their subjects) beside the default
	// ones. Only some scenarios have them: an unacknowledged durable
	// charge costs its connection (WAIT answers after the call's budget),
	// which changes how the rest of that host's traffic meets the fault.
	Durable bool
	// Global, when not nil, runs the scenario on the multi-Region
	// topology (global.go) with these bounds; Redis and Bounds are then
	// unused.
	Global *GlobalBounds
	// inject makes the fault and ends it, recording the fault, heal and
	// promoted events; it returns when the fault is over.
	inject func(ctx context.Context, r *run) error
}

// Constants the bounds are stated in (docs/RELIABILITY.md).
const (
	// downAfter is Sentinel's down-after-milliseconds in every scenario:
	// above the 5 s pause, below the 15 s one.
	downAfter = 7 * time.Second
	// replicationLag bounds how far a replica may trail the primary when
	// it is promoted: the writes Redis acknowledged within it may be lost.
	// Replication streams each write at once; a second covers a replica
	// that was briefly slow to read (its ACKs are 1 s apart).
	replicationLag = time.Second
	// demotion is how long an old primary that comes back (a pause, a
	// healed partition) may take writes before the Sentinels make it a
	// replica of the new one: they see it within a second or two and send
	// REPLICAOF at once.
	demotion = 4 * time.Second
	// minReplicasLag is min-replicas-max-lag in the split-brain scenario
	// that sets min-replicas-to-write 1.
	minReplicasLag = 2 * time.Second
	// leaseTTL is LEASE_TTL (the default): a leased token is admitted at
	// most this long after Redis charged it.
	leaseTTL = 250 * time.Millisecond
	// propagationBound is how soon every host enforces a changed rule
	// once it can reach Redis and the write is acknowledged: the version
	// poll (RULES_VERSION_POLL, 1 s), the reload debounce (1 s), a
	// snapshot read, and a second of slack for a loaded machine.
	propagationBound = 3 * time.Second
)

// toRedis are the hosts "Redis" means for a decision host: the data nodes
// and the Sentinels it asks for the primary.
var toRedis = append(append([]string(nil), redisHosts...), sentinelHosts...)

// Scenarios returns every scenario of make chaos.
func Scenarios() []Scenario {
	defaults := RedisOptions{DownAfter: downAfter}
	none := Bounds{LeaseTTL: leaseTTL, Propagation: propagationBound}
	lost := func(w time.Duration) Bounds { b := none; b.LostWindow = w; return b }
	return append([]Scenario{
		{Name: "latency-50ms", Fault: "+50 ms between d1 and Redis", Redis: defaults, Load: 25 * time.Second, At: 5 * time.Second, Bounds: none,
			inject: networkFault(10*time.Second, func(ctx context.Context, n *Nemesis) error {
				return n.Delay(ctx, "d1", 50*time.Millisecond, toRedis...)
			})},
		{Name: "latency-200ms", Fault: "+200 ms between d1 and Redis", Redis: defaults, Load: 25 * time.Second, At: 5 * time.Second, Bounds: none,
			inject: networkFault(10*time.Second, func(ctx context.Context, n *Nemesis) error {
				return n.Delay(ctx, "d1", 200*time.Millisecond, toRedis...)
			})},
		{Name: "loss-30", Fault: "30 % packet loss between d1 and Redis", Redis: defaults, Load: 25 * time.Second, At: 5 * time.Second, Bounds: none,
			inject: networkFault(10*time.Second, func(ctx context.Context, n *Nemesis) error { return n.Loss(ctx, "d1", 0.3, toRedis...) })},
		{Name: "partition", Fault: "d1 partitioned from Redis for 10 s", Redis: defaults, Load: 25 * time.Second, At: 5 * time.Second, Bounds: none,
			inject: networkFault(10*time.Second, func(ctx context.Context, n *Nemesis) error { return n.Partition(ctx, "d1", toRedis...) })},
		{Name: "pause-5s", Fault: "primary paused (SIGSTOP) 5 s < down-after", Redis: defaults, Load: 25 * time.Second, At: 5 * time.Second, Bounds: none,
			inject: pause(5 * time.Second)},
		{Name: "pause-15s", Fault: "primary paused 15 s > down-after", Redis: defaults, Load: 35 * time.Second, At: 5 * time.Second,
			Bounds: lost(replicationLag + demotion), inject: pause(15 * time.Second)},
		{Name: "kill", Fault: "primary killed; Sentinel promotes a replica", Redis: defaults, Load: 30 * time.Second, At: 5 * time.Second,
			Bounds: lost(replicationLag), inject: kill},
		{Name: "kill-durable", Fault: "primary killed, with durable quotas", Redis: defaults, Load: 30 * time.Second, At: 5 * time.Second,
			Bounds: lost(replicationLag), inject: kill, Durable: true},
		{Name: "split", Fault: "split brain 15 s: primary + d1 cut from the rest", Redis: defaults, Load: 35 * time.Second, At: 5 * time.Second,
			Bounds: lost(15*time.Second + demotion), inject: split(15 * time.Second)},
		{Name: "split-durable", Fault: "split brain 15 s, with durable quotas", Redis: defaults, Load: 35 * time.Second, At: 5 * time.Second,
			Bounds: lost(15*time.Second + demotion), inject: split(15 * time.Second), Durable: true},
		{Name: "split-minreplicas", Fault: "split brain 15 s, min-replicas-to-write 1, max-lag 2 s",
			Redis: RedisOptions{DownAfter: downAfter, MinReplicas: 1, MinReplicasMaxLag: minReplicasLag}, Load: 35 * time.Second, At: 5 * time.Second,
			Bounds: lost(minReplicasLag + 2*time.Second), inject: split(15 * time.Second)},
		{Name: "pg-partition", Fault: "PostgreSQL partitioned from everything 10 s", Redis: defaults, Load: 25 * time.Second, At: 5 * time.Second, Bounds: none,
			inject: networkFault(10*time.Second, func(ctx context.Context, n *Nemesis) error {
				return n.Partition(ctx, "pg", "ctl", "d1", "d2", "d3", "load", "r1", "r2", "r3", "s1", "s2", "s3")
			})},
	}, globalScenarios(3000, 75*time.Second, 20*time.Second, 20*time.Second)...)
}

// ShortScenarios are the scenarios of the short run in make test: two
// regional ones, and the global steady and cut-open ones, 12 s each with a
// limit of 600 a minute, which the load spends in about 5 s.
func ShortScenarios() []Scenario {
	return append(named(Scenarios(), "partition", "kill-durable"),
		named(globalScenarios(600, 12*time.Second, 3*time.Second, 6*time.Second), "global-steady", "global-cut-open")...)
}

// named keeps the scenarios of ss with one of names, in ss's order.
func named(ss []Scenario, names ...string) []Scenario {
	return slices.DeleteFunc(ss, func(s Scenario) bool { return !slices.Contains(names, s.Name) })
}

// faultFor makes a fault (start), holds it for d and ends it (end);
// watch records the Sentinels' promotion of another primary meanwhile.
func faultFor(d time.Duration, watch bool, start, end func(context.Context, *run) error) func(context.Context, *run) error {
	return func(ctx context.Context, r *run) error {
		if err := start(ctx, r); err != nil {
			return err
		}
		r.event("fault")
		if watch {
			defer r.watchPromotion(ctx)()
		}
		r.sleep(ctx, d)
		r.event("heal") // recovery and propagation count from the first rule removed
		return end(ctx, r)
	}
}

// networkFault applies fault for d, then heals.
func networkFault(d time.Duration, fault func(context.Context, *Nemesis) error) func(context.Context, *run) error {
	return faultFor(d, false, func(ctx context.Context, r *run) error { return fault(ctx, r.nem) }, heal)
}

// heal ends the scenario's network faults.
func heal(ctx context.Context, r *run) error { return r.nem.Heal(ctx) }

// pause stops the primary with SIGSTOP for d, then lets it go on.
func pause(d time.Duration) func(context.Context, *run) error {
	signal := func(sig syscall.Signal) func(context.Context, *run) error {
		return func(_ context.Context, r *run) error { return r.c.Redis["r1"].Signal(sig) }
	}
	return faultFor(d, true, signal(syscall.SIGSTOP), signal(syscall.SIGCONT))
}

// kill kills the primary; the fault ends when the Sentinels name another.
func kill(ctx context.Context, r *run) error {
	r.c.Redis["r1"].Kill()
	r.event("fault")
	stop := r.watchPromotion(ctx)
	defer stop()
	err := poll(ctx, 30*time.Second, 50*time.Millisecond, nil, func() error {
		if r.at("promoted") > 0 {
			return nil
		}
		return errors.New("no replica promoted within 30 s of the kill")
	})
	if err == nil {
		r.event("heal")
	}
	return err
}

// split cuts the primary and d1 from the replicas, the Sentinels and the
// other decision hosts for d: the majority promotes a replica while d1
// keeps writing to the old primary. Then it heals.
func split(d time.Duration) func(context.Context, *run) error {
	return faultFor(d, true, func(ctx context.Context, r *run) error {
		if err := r.nem.Partition(ctx, "r1", "r2", "r3", "s1", "s2", "s3", "d2", "d3"); err != nil {
			return err
		}
		return r.nem.Partition(ctx, "d1", "r2", "r3", "s1", "s2", "s3")
	}, heal)
}
