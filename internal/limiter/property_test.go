package limiter_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

var propertySeed = flag.Uint64("limiter.seed", 0, "seed of TestPropertyMatchesModel; 0 picks one, which the test logs")

// Sizes of TestPropertyMatchesModel: about 11,500 calls, 10 to 12 s under
// -race on two shared cores (a tenth of that with -short).
const (
	propertySets  = 400 // rule sets, each its own subject
	propertySteps = 30  // requests (and rule changes) per rule set
)

// TestPropertyMatchesModel is the proof that a rule validation accepts never
// breaks a decision. It draws random rule sets (1-4 rules, rate or blocked,
// enforcing or shadow, inline or through a plan, 1s to 1y, many near the
// bounds; calendar quotas, anchored or not, some on a 29th-31st, a few
// whose daily window ends during the set; admission floors) and keeps only
// what rules.NewSnapshot accepts, so it covers
// exactly what validation lets reach the limiter; then it plays random
// requests against real Redis through Allow and Peek (any cost from 0, a
// peek, to rules.MaxCost, rule changes between requests, short sleeps), and
// checks every call:
//
//   - no error: the script answers every call;
//   - the Decision is the reference model's (see model) for the
//     microsecond the script read from TIME, and Redis then holds what the
//     model wrote, to the bit: on a deny nothing written but a bucket
//     converted to new numbers, every bucket with the tokens charged on an
//     allow, no partial write;
//   - durations are never negative, RetryAfter is at most Reset, Reset at
//     most MaxHorizon;
//   - over the whole run, no bucket gives more than burst + limit·t/period
//     tokens (DESIGN.md's exactness bound), counted from what Redis holds.
//
// Time: the script's clock is Redis TIME, which the test cannot stop. Each
// call is bracketed by two MULTI snapshots that read TIME with every key's
// value and PTTL; nothing else writes the subject's keys, so the script saw
// the first snapshot's values at some microsecond between the two TIMEs.
// The model is evaluated at each of those microseconds in turn, and the
// call passes when one of them gives exactly the Decision Allow returned
// and exactly the values Redis holds. That is exact (no tolerance on any
// number) and robust: a bucket that refills during the bracket only widens
// the set of acceptable answers to what some instant of it gives. The only
// tolerance is on PTTL, which Redis counts in whole milliseconds of its
// own clock: it may run down by the bracket plus pttlSlack.
//
// The seed is logged; rerun one with -args -limiter.seed=N.
func TestPropertyMatchesModel(t *testing.T) {
	c := testenv.Client(t, testenv.RedisURL(t), func(o *redis.Options) { o.Protocol = 2 })
	prefix := testenv.Prefix(t, "limiter")
	testenv.DeleteKeys(t, c, prefix)
	// Every call goes to Redis: no deny cache, and no breaker to hide an
	// error behind a failure-mode decision.
	l := limiter.New(c, limiter.Options{Prefix: prefix, Timeout: 5 * time.Second, DenyCacheSize: -1, BreakerThreshold: -1})
	seed := *propertySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d", seed)
	p := &property{t: t, c: c, l: l, prefix: prefix, rng: rand.New(rand.NewPCG(seed, 0x5c1ce))}
	start := time.Now()
	sets := propertySets
	if testing.Short() {
		sets /= 10
	}
	for set := range sets {
		p.run(set)
		if t.Failed() {
			t.Fatalf("seed %d, rule set %d: %s", seed, set, p.describe())
		}
	}
	t.Logf("%d rule sets (%d rules drawn, %d refused by validation), %d calls (%d allowed, %d denied, %d peeks; %d of them answered by a blocked bucket), %d rule changes (%d buckets carried over), %d quota charges (%d opened their window), widest TIME bracket %dµs, in %v",
		sets, p.drawn, p.refused, p.calls, p.allowed, p.denied, p.peeks, p.blocked, p.changes, p.converted, p.quotaCharges, p.openedWindows, p.widest, time.Since(start).Round(time.Millisecond))
	if p.allowed == 0 || p.denied == 0 || p.refused == 0 || p.converted == 0 || p.quotaCharges == 0 || p.openedWindows == 0 || p.openedWindows == p.quotaCharges {
		t.Errorf("allowed %d, denied %d, refused %d, carried over %d, quota charges %d (%d opened their window): the draw no longer covers both outcomes, both sides of validation, a change of numbers and quotas (opening a window and counting in one)", p.allowed, p.denied, p.refused, p.converted, p.quotaCharges, p.openedWindows)
	}
}

// property is one run of TestPropertyMatchesModel.
type property struct {
	t      *testing.T
	c      *redis.Client
	l      *limiter.Limiter
	prefix string
	rng    *rand.Rand

	// The rule set being played.
	subject string
	effs    []rules.Effective
	bs      []limiter.Bucket
	keys    []string
	// Per bucket, for the exactness bound since its numbers last changed:
	// tokens charged, and the first and last TIME of the calls that count.
	charged          []float64
	valid            []int64 // per bucket, the burst of its last drawn rule
	firstUS, lastUS  []int64
	step             int
	last             string // the last call, for a failure message
	drawn, refused   int
	calls, allowed   int
	denied, peeks    int
	blocked, changes int
	converted        int // calls that carried a bucket's use over to new numbers
	quotaCharges     int // quota buckets charged
	openedWindows    int // quota charges that opened their window (no key before)
	widest           int64
}

func (p *property) describe() string {
	var b strings.Builder
	for i, e := range p.effs {
		fmt.Fprintf(&b, "\n  bucket %d: %s limit %d per %v burst %d cost %d mode %s (limiter %+v)", i, e.ID, e.Limit, e.Period, e.Burst, e.Cost, e.Mode, p.bs[i])
	}
	fmt.Fprintf(&b, "\n  step %d: %s", p.step, p.last)
	return b.String()
}

// run plays one rule set.
func (p *property) run(set int) {
	p.subject = "prop-" + strconv.Itoa(set)
	ids := make([]string, 1+p.rng.IntN(4))
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i)
	}
	p.effs = p.draw(ids)
	p.bs = make([]limiter.Bucket, len(p.effs))
	p.keys = make([]string, len(p.effs))
	p.charged = make([]float64, len(p.effs))
	p.valid = make([]int64, len(p.effs))
	p.firstUS = make([]int64, len(p.effs))
	p.lastUS = make([]int64, len(p.effs))
	for i := range p.effs {
		p.bs[i] = limiter.BucketFor(&p.effs[i])
		p.keys[i] = p.key(p.bs[i])
		p.firstUS[i] = -1
		p.valid[i] = p.effs[i].Burst
	}
	for _, b := range p.bs {
		// A window ending within a second: start just before its end, by
		// Redis TIME (the scripts' clock).
		if b.Window == limiter.Daily {
			if d := time.Until(b.Anchor); d > 0 && d <= 2*time.Second {
				at := b.Anchor.Add(-25 * time.Millisecond)
				testenv.Await(p.t, 5*time.Second, 5*time.Millisecond, "Redis TIME 25ms before a window's end", func() bool {
					now, err := p.c.Time(context.Background()).Result()
					if err != nil {
						p.t.Fatalf("TIME: %v", err)
					}
					return !now.Before(at)
				})
				break
			}
		}
	}
	for p.step = 0; p.step < propertySteps && !p.t.Failed(); p.step++ {
		var pause time.Duration
		switch r := p.rng.Float64(); {
		case r < 0.06:
			// A rule's numbers change (a new rule or plan, or only its
			// burst); its key keeps what was used, and the model converts
			// it as the script does on the next call.
			j := p.rng.IntN(len(p.bs))
			e := p.draw([]string{p.bs[j].ID})[0]
			if old := p.effs[j]; p.rng.Float64() < 0.3 && old.Limit > 0 && old.Kind == rules.Quota {
				// A quota's upgrade or downgrade: its used carries over.
				e = old
				e.Limit = p.logUniform(max(e.Cost+e.MinRemaining, 1), rules.MaxLimit)
				e.Burst = e.Limit
			} else if p.rng.Float64() < 0.3 && old.Limit > 0 && old.Kind != rules.Quota {
				// Only the burst: the same T, a capacity down or back up,
				// within the burst validation accepted for these numbers.
				e = old
				e.Burst = 1 + p.rng.Int64N(p.valid[j])
				e.Cost = min(e.Cost, e.Burst)
				e.MinRemaining = min(e.MinRemaining, e.Burst-e.Cost)
			} else {
				p.valid[j] = e.Burst
			}
			p.effs[j], p.bs[j] = e, limiter.BucketFor(&e)
			p.keys[j] = p.key(p.bs[j])
			p.charged[j], p.firstUS[j] = 0, -1
			p.changes++
			continue
		case r < 0.12:
			pause = time.Duration(500+p.rng.IntN(2500)) * time.Microsecond
		case r < 0.13:
			pause = 20 * time.Millisecond
		}
		if pause > 0 {
			time.Sleep(pause) // sleep: Redis TIME refills the buckets between calls, which the model checks
		}
		if p.rng.Float64() < 0.03 {
			p.peek()
		} else {
			p.allow(p.cost())
		}
	}
}

// draw returns rules with the given ids as NewSnapshot applies them,
// drawing until at least one is accepted: what validation refuses never
// reaches the limiter, so it is counted and dropped.
func (p *property) draw(ids []string) []rules.Effective {
	for {
		var rs []rules.Rule
		var ps []rules.Plan
		for _, id := range ids {
			r, plan := p.drawRule(id)
			rs = append(rs, r)
			if plan != nil {
				ps = append(ps, *plan)
			}
		}
		snap := rules.NewSnapshot(rs, ps, rules.SnapshotOptions{})
		p.drawn += len(rs)
		for _, s := range snap.Skipped() {
			if s.Kind == rules.KindRule {
				p.refused++
			}
		}
		if effs := snap.Rules(); len(effs) > 0 {
			return effs
		}
	}
}

// drawRule draws one rule, and the plan it names if it names one. The
// numbers are log-uniform, with a good share on and just past the bounds
// (burst and cost at the refill horizon, cost at the burst), so that
// validation refuses some and what it accepts reaches its limits.
func (p *property) drawRule(id string) (rules.Rule, *rules.Plan) {
	rng := p.rng
	r := rules.Rule{ID: id, API: "a", Route: "GET /" + id, Subject: "*", Mode: rules.Enforce}
	if rng.Float64() < 0.25 {
		r.Mode = rules.Shadow
	}
	if rng.Float64() < 0.3 {
		return p.drawQuota(r)
	}
	defer p.drawFloor(&r)
	periods := []time.Duration{time.Second, time.Minute, time.Hour, rules.Day, rules.Week, 30 * rules.Day, rules.Year}
	period := periods[rng.IntN(len(periods))]
	if rng.Float64() < 0.5 {
		period = time.Duration(p.logUniform(1, int64(rules.Year/time.Second))) * time.Second
	}
	limit := p.logUniform(1, rules.MaxLimit)
	if rng.Float64() < 0.03 {
		limit = 0
	}
	// The largest burst within the horizon (float: near it is enough, the
	// validator decides).
	maxBurst := min(int64(float64(rules.MaxHorizon)/float64(period)*float64(limit)), rules.MaxBurst)
	var burst *int64
	switch x := rng.Float64(); {
	case limit == 0 || x < 0.35:
	case x < 0.50:
		burst = new(maxBurst)
	case x < 0.55:
		burst = new(maxBurst + 1)
	case x < 0.60:
		burst = new(int64(rules.MaxBurst))
	default:
		burst = new(p.logUniform(limit, max(limit, maxBurst)))
	}
	capacity := limit
	if burst != nil {
		capacity = *burst
	}
	var cost *int64
	switch x := rng.Float64(); {
	case x < 0.40:
	case limit == 0:
		cost = new(p.logUniform(1, rules.MaxCost))
	case x < 0.50:
		cost = new(min(capacity, rules.MaxCost))
	case x < 0.55:
		cost = new(capacity + 1)
	default:
		cost = new(p.logUniform(1, min(capacity, rules.MaxCost)))
	}
	r.Cost = cost
	if rng.Float64() < 0.3 {
		plan := &rules.Plan{Name: "p-" + id, Limit: limit, Period: rules.Period(period), Burst: burst}
		r.Plan = plan.Name
		return r, plan
	}
	r.Limit, r.Period, r.Burst = new(limit), rules.Period(period), burst
	return r, nil
}

// drawQuota draws a quota rule (and its plan, sometimes): a calendar
// window, anchored or not (anchors from 1970 to 2099, some on a 29th-31st,
// some ending within seconds of now), a limit from 0 to MaxLimit, a cost
// near it and sometimes past it, a floor sometimes.
func (p *property) drawQuota(r rules.Rule) (rules.Rule, *rules.Plan) {
	rng := p.rng
	r.Kind = rules.Quota
	periods := []rules.Period{rules.Period(rules.Day), rules.Period(rules.Week), rules.Month, rules.Period(rules.Year)}
	period := periods[rng.IntN(len(periods))]
	switch x := rng.Float64(); {
	case x < 0.3:
	case x < 0.31:
		// A daily window ending at the next whole second: run waits until
		// just before it, so that the set crosses it (a few sets a run;
		// TestQuotaWindowReset crosses one every time).
		end := time.Now().Truncate(time.Second).Add(time.Second).UTC()
		r.Anchor, period = end.Format(time.RFC3339), rules.Period(rules.Day)
	case x < 0.5:
		r.Anchor = time.Now().Add(time.Duration(rng.IntN(48*3600)) * time.Second).UTC().Format(time.RFC3339)
	case x < 0.7:
		// The 29th to 31st, for the clamping.
		r.Anchor = time.Date(1970+rng.IntN(130), time.Month(1+rng.IntN(12)), 29+rng.IntN(3), rng.IntN(24), rng.IntN(60), rng.IntN(60), 0, time.UTC).Format(time.RFC3339)
	default:
		r.Anchor = time.Unix(rng.Int64N(4102444800), 0).UTC().Format(time.RFC3339)
	}
	limit := p.logUniform(1, rules.MaxLimit)
	if rng.Float64() < 0.1 {
		limit = p.logUniform(1, 10)
	}
	if rng.Float64() < 0.03 {
		limit = 0
	}
	switch x := rng.Float64(); {
	case x < 0.4:
	case x < 0.5 && limit > 0:
		r.Cost = new(min(limit, rules.MaxCost))
	case x < 0.55:
		r.Cost = new(min(limit+1, rules.MaxCost))
	default:
		r.Cost = new(p.logUniform(1, max(1, min(limit, rules.MaxCost))))
	}
	p.drawFloor(&r)
	if rng.Float64() < 0.3 {
		plan := &rules.Plan{Name: "p-" + r.ID, Kind: rules.Quota, Limit: limit, Period: period}
		r.Plan = plan.Name
		return r, plan
	}
	r.Limit, r.Period = new(limit), period
	return r, nil
}

// drawFloor sometimes gives r an admission floor, at times past what its
// capacity leaves (validation refuses those).
func (p *property) drawFloor(r *rules.Rule) {
	if p.rng.Float64() < 0.15 {
		r.MinRemaining = new(p.logUniform(1, rules.MaxBurst/10))
		if p.rng.Float64() < 0.5 {
			r.MinRemaining = new(p.rng.Int64N(4))
		}
	}
}

// cost draws a request's cost: mostly what the rules say, often small,
// sometimes at or past a bucket's burst (a request that can never pass),
// sometimes 0 (Allow's peek), sometimes anything up to MaxCost.
func (p *property) cost() int64 {
	rng := p.rng
	i := rng.IntN(len(p.bs))
	capacity := p.effs[i].Burst
	switch x := rng.Float64(); {
	case x < 0.35:
		return p.effs[i].Cost
	case x < 0.60:
		return rng.Int64N(4)
	case x < 0.80:
		return p.logUniform(1, max(1, min(capacity, rules.MaxCost)))
	case x < 0.90:
		return max(1, capacity+rng.Int64N(3)-1)
	case x < 0.95:
		return 0
	}
	return p.logUniform(1, rules.MaxCost)
}

// logUniform draws from lo..hi (lo >= 1), uniformly in log scale.
func (p *property) logUniform(lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	v := int64(math.Exp(math.Log(float64(lo)) + p.rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
	return min(max(v, lo), hi)
}

// snapshot is what a MULTI read of the subject's keys saw.
type snapshot struct {
	now  int64 // TIME, microseconds since 2024-01-01 UTC as the script counts
	val  []string
	has  []bool
	num  []float64 // <tat>; a quota's window end, µs since 2024
	per  []float64 // <T>, 0 in a value of the previous version ("<tat>"); -1 a quota's
	cap  []float64 // <burst>, 0 in a value of the previous version; a quota's used
	pttl []time.Duration
}

func (p *property) read() snapshot {
	ctx := context.Background()
	var tm *redis.TimeCmd
	gets := make([]*redis.StringCmd, len(p.keys))
	ttls := make([]*redis.DurationCmd, len(p.keys))
	_, err := p.c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		tm = pipe.Time(ctx)
		for i, k := range p.keys {
			gets[i] = pipe.Get(ctx, k)
			ttls[i] = pipe.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		p.t.Fatalf("MULTI read: %v", err)
	}
	s := snapshot{
		now:  tm.Val().UnixMicro() - 1704067200*1_000_000,
		val:  make([]string, len(p.keys)),
		has:  make([]bool, len(p.keys)),
		num:  make([]float64, len(p.keys)),
		per:  make([]float64, len(p.keys)),
		cap:  make([]float64, len(p.keys)),
		pttl: make([]time.Duration, len(p.keys)),
	}
	for i := range p.keys {
		v, err := gets[i].Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			p.t.Fatalf("GET %s: %v", p.keys[i], err)
		}
		s.val[i], s.has[i], s.pttl[i] = v, true, ttls[i].Val()
		var ok bool
		if b := p.bs[i]; b.Window != limiter.NoWindow {
			// A quota's key holds its used and expires with its window:
			// the window that holds now, as the key exists.
			used, err := strconv.ParseInt(v, 10, 64)
			if err != nil || used < 0 || s.pttl[i] < 0 {
				p.t.Fatalf("quota bucket %d holds %q (PTTL %v), not its used expiring with the window", i, v, s.pttl[i])
			}
			s.num[i], s.per[i], s.cap[i] = windowEnd(b, s.now), -1, float64(used)
			continue
		}
		if s.num[i], s.per[i], s.cap[i], ok = parseStored(v); !ok {
			p.t.Fatalf("bucket %d holds %q, not \"<tat> <T> <burst>\"", i, v)
		}
	}
	return s
}

// parseStored splits a stored value, "<tat> <T> <burst>" or the previous
// version's "<tat>" (T and burst 0), into its numbers.
func parseStored(v string) (tat, per, burst float64, ok bool) {
	f := strings.Fields(v)
	if len(f) != 1 && len(f) != 3 {
		return 0, 0, 0, false
	}
	var errs [3]error
	tat, errs[0] = strconv.ParseFloat(f[0], 64)
	if len(f) == 3 {
		per, errs[1] = strconv.ParseFloat(f[1], 64)
		burst, errs[2] = strconv.ParseFloat(f[2], 64)
	}
	return tat, per, burst, errors.Join(errs[:]...) == nil
}

// key is bucket b's Redis key, as bucket.lua's header and limiter.go name
// it: a quota's names its window's unit and anchor (milliseconds since
// 2024), so that a change of either is a fresh window.
func (p *property) key(b limiter.Bucket) string {
	k := p.prefix + "{" + limiter.SubjectHash(p.subject) + "}:" + b.ID
	if b.Window == limiter.NoWindow {
		return k
	}
	var anchor int64
	if !b.Anchor.IsZero() {
		anchor = b.Anchor.UnixMilli() - 1704067200*1000
	}
	return k + ":q" + string("rdwmy"[b.Window]) + strconv.FormatInt(anchor, 10)
}

// allow plays one Allow and checks it.
func (p *property) allow(cost int64) {
	p.last = "Allow(cost " + strconv.FormatInt(cost, 10) + ")"
	before := p.read()
	d, err := p.l.Allow(context.Background(), limiter.Request{Subject: p.subject, Buckets: p.bs, Cost: cost})
	after := p.read()
	p.last += fmt.Sprintf(" = %+v, %v\n  before %+v\n  after  %+v", d, err, before, after)
	if err != nil {
		p.t.Errorf("Allow error %v: the script must answer every call of a valid rule set", err)
		return
	}
	p.calls++
	p.widest = max(p.widest, after.now-before.now)
	p.checkDurations(d)
	switch {
	case cost == 0:
		p.peeks++
	case d.Allowed:
		p.allowed++
	default:
		p.denied++
	}

	// A blocked enforcing bucket denies without Redis.
	for i, b := range p.bs {
		if b.Limit == 0 && !b.Shadow {
			p.blocked++
			want := limiter.Decision{Bucket: i, RetryAfter: b.Period}
			if d != want {
				p.t.Errorf("Allow = %+v, want %+v: bucket %d is blocked", d, want, i)
			}
			p.checkUnchanged(before, after)
			return
		}
	}

	// A quota key whose window ends within the bracket may count the call
	// in that window by Redis's clock (lenient; see model.run).
	lenient := false
	for i, b := range p.bs {
		lenient = lenient || b.Window != limiter.NoWindow && before.has[i] && before.num[i] <= float64(after.now)
	}
	var m model
	for k := 0; k < 2*int(after.now-before.now+1); k++ {
		now, qnow := before.now+int64(k/2), before.now+int64(k/2)
		if k%2 == 1 {
			if !lenient {
				continue
			}
			qnow = before.now
		}
		m.run(p.bs, before, cost, now, qnow)
		if m.decision(p.bs) == d && p.stateMatches(&m, before, after, now) {
			p.count(&m, before, after)
			for i := range p.bs {
				if m.converted[i] {
					p.converted++
				}
				if m.quota[i] && m.charged[i] {
					p.quotaCharges++
				}
				if m.quota[i] && m.charged[i] && !before.has[i] {
					p.openedWindows++
				}
			}
			return
		}
	}
	m.run(p.bs, before, cost, before.now, before.now)
	first := m.decision(p.bs)
	m.run(p.bs, before, cost, after.now, after.now)
	p.t.Errorf("no microsecond of the TIME bracket [%d, %d] gives Allow's decision and Redis's values:\n  got          %+v\n  model(first) %+v\n  model(last)  %+v, next %v",
		before.now, after.now, d, first, m.decision(p.bs), m.next)
}

// peek plays one Peek and checks it against the model's per-bucket state.
func (p *property) peek() {
	p.last = "Peek"
	before := p.read()
	got, err := p.l.Peek(context.Background(), p.subject, p.bs)
	after := p.read()
	p.last += fmt.Sprintf(" = %+v, %v\n  before %+v\n  after  %+v", got, err, before, after)
	if err != nil {
		p.t.Errorf("Peek error %v", err)
		return
	}
	p.calls++
	p.peeks++
	p.checkUnchanged(before, after)
	var m model
	for now := before.now; now <= after.now; now++ {
		m.run(p.bs, before, 0, now, now)
		ok := true
		for i, s := range got {
			ok = ok && s == limiter.BucketState{Remaining: m.remaining(i), Reset: ms(m.reset(i))}
		}
		if ok {
			return
		}
	}
	p.t.Errorf("no microsecond of the TIME bracket [%d, %d] gives Peek's %+v", before.now, after.now, got)
}

// checkDurations checks what every Decision promises.
func (p *property) checkDurations(d limiter.Decision) {
	if d.Bucket < 0 || d.Bucket >= len(p.bs) {
		p.t.Errorf("Decision.Bucket = %d, want 0..%d", d.Bucket, len(p.bs)-1)
		return
	}
	b := p.bs[d.Bucket]
	capacity := b.Burst
	if capacity <= 0 {
		capacity = b.Limit
	}
	switch {
	case d.Reset < 0 || d.RetryAfter < 0:
		p.t.Errorf("Decision %+v: a negative duration", d)
	case d.Reset > limiter.MaxHorizon+time.Millisecond:
		p.t.Errorf("Decision %+v: Reset beyond MaxHorizon", d)
	case d.Remaining < 0 || d.Remaining > capacity:
		p.t.Errorf("Decision %+v: Remaining outside 0..%d", d, capacity)
	case d.Allowed && d.RetryAfter != 0:
		p.t.Errorf("Decision %+v: allowed with a RetryAfter", d)
	case !d.Allowed && d.RetryAfter <= 0:
		p.t.Errorf("Decision %+v: denied without a RetryAfter", d)
	case !d.Allowed && b.Limit > 0 && d.RetryAfter != b.Period && d.RetryAfter > d.Reset:
		p.t.Errorf("Decision %+v: RetryAfter beyond Reset", d)
	}
}

// stateMatches reports whether Redis holds, after the call, what the model
// wrote at now: the new value of every charged or converted bucket, its
// <tat>, <T> and <burst> bit for bit, with a
// PTTL counted from now; the old value of every other. A key may be gone
// only once its bucket is full again.
func (p *property) stateMatches(m *model, before, after snapshot, now int64) bool {
	for i := range p.bs {
		if !m.written[i] {
			if !p.unchanged(before, after, i) {
				return false
			}
			continue
		}
		if !after.has[i] {
			// Gone: only when already full again (a fast bucket).
			if m.next[i] > float64(after.now) {
				return false
			}
			continue
		}
		if m.quota[i] {
			// Written with PXAT its window's end: the PTTL counts down to it.
			ttl := time.Duration(m.at[i]-float64(after.now)) * time.Microsecond
			if after.val[i] != m.quotaValue(p.bs, i) || after.pttl[i] > ttl+2*time.Millisecond || after.pttl[i] < ttl-pttlSlack {
				return false
			}
			continue
		}
		ttl := time.Duration(m.ttl[i]) * time.Millisecond
		elapsed := time.Duration(after.now-now)*time.Microsecond + pttlSlack
		if after.num[i] != m.next[i] || after.per[i] != m.t[i] || after.cap[i] != m.burst[i] ||
			after.pttl[i] > ttl || after.pttl[i] < ttl-elapsed {
			return false
		}
	}
	return true
}

// unchanged reports whether bucket i was left alone between the snapshots:
// same value, PTTL only run down, or gone once full.
func (p *property) unchanged(before, after snapshot, i int) bool {
	switch {
	case !before.has[i]:
		return !after.has[i]
	case !after.has[i]:
		return before.num[i] <= float64(after.now) // expired: it was full
	}
	elapsed := time.Duration(after.now-before.now)*time.Microsecond + pttlSlack
	return after.val[i] == before.val[i] && after.pttl[i] <= before.pttl[i] && after.pttl[i] >= before.pttl[i]-elapsed
}

func (p *property) checkUnchanged(before, after snapshot) {
	for i := range p.bs {
		if !p.unchanged(before, after, i) {
			p.t.Errorf("bucket %d changed (%q, %v → %q, %v) by a call that charges nothing", i, before.val[i], before.pttl[i], after.val[i], after.pttl[i])
		}
	}
}

// count adds the tokens Redis shows charged to the exactness bound and
// checks it: since its numbers last changed, a bucket gives at most
// burst + limit·t/period tokens over t (plus the script's 1e-6 a charge).
func (p *property) count(m *model, before, after snapshot) {
	for i, b := range p.bs {
		if b.Limit == 0 {
			continue
		}
		if b.Window != limiter.NoWindow {
			// A quota never holds more than its limit used (nor less
			// than 0) in a window: what the charges left shows it.
			if m.charged[i] && (m.h[i] < -eps || m.h[i] > float64(b.Limit)) {
				p.t.Errorf("quota bucket %d left %v tokens of %d", i, m.h[i], b.Limit)
			}
			continue
		}
		if p.firstUS[i] < 0 {
			p.firstUS[i] = before.now
		}
		p.lastUS[i] = after.now
		if m.charged[i] {
			p.charged[i] += float64(m.cost)
		}
		capacity := b.Burst
		if capacity <= 0 {
			capacity = b.Limit
		}
		refill := float64(b.Limit) * float64(p.lastUS[i]-p.firstUS[i]) / float64(b.Period.Microseconds())
		if bound := float64(capacity) + refill + 1e-6*float64(p.step+1); p.charged[i] > bound*(1+1e-12) {
			p.t.Errorf("bucket %d gave %v tokens in %dµs, more than burst + refill = %v", i, p.charged[i], p.lastUS[i]-p.firstUS[i], bound)
		}
	}
}

// pttlSlack is how much more than the TIME bracket a PTTL may run down
// between the snapshots: PTTL counts whole milliseconds (1 ms of rounding),
// and Redis counts a script's PX from its cached clock, taken when the
// script started, while the script's TIME reads the real clock later: on a
// loaded machine (make test on 2 cores) Redis can be descheduled between
// the two for tens of milliseconds. The upper bound (a PTTL longer than the
// model's) stays exact.
const pttlSlack = 50 * time.Millisecond

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

// model is the reference: the token bucket of bucket.lua's header, in its
// GCRA form (a stored "<tat> <T> <burst>": the time at which the bucket is
// full again and the numbers it was computed with; a missing key a full
// bucket; other numbers convert what was used, clamped to the new burst) and in float64 like the script, so that for a given
// microsecond it gives the script's numbers to the bit; the EPS of 1e-6
// tokens is part of that specification. Explicit float64 conversions keep
// the compiler from fusing a multiply-add the script does in two roundings.
//
// It decides as the header says: every enforcing bucket needs the tokens
// (a cost of 0 decides as a cost of 1 and charges nothing); on an allow
// every bucket that has them is charged; the limiting bucket is, when
// denied, the enforcing one with the longest wait (a wait of "never"
// first), when allowed the enforcing one with the fewest tokens left.
type model struct {
	cost    int64
	now     int64 // µs, the script's TIME
	allowed bool
	lim     int   // limiting bucket, 0-based
	wait    int64 // ms; -1 never
	mask    uint32
	at, h   [limiter.MaxBuckets]float64 // full-again time (µs) and tokens, after the call
	t       [limiter.MaxBuckets]float64 // µs per token; 0 blocked
	burst   [limiter.MaxBuckets]float64 // capacity
	next    [limiter.MaxBuckets]float64 // the <tat> written
	ttl     [limiter.MaxBuckets]int64   // its PX, ms
	charged [limiter.MaxBuckets]bool
	// converted: the stored T or burst was not the bucket's, and what was
	// used carried over; written: the call writes the bucket (charged, or
	// converted by a call that is not a peek).
	converted, written [limiter.MaxBuckets]bool
	// quota: a quota bucket; its at is its window's end and its t is -1.
	quota [limiter.MaxBuckets]bool
}

// quotaValue is what the script stores for quota bucket i after the call:
// its used, an integer.
func (m *model) quotaValue(bs []limiter.Bucket, i int) string {
	return strconv.FormatInt(bs[i].Limit-int64(m.h[i]), 10)
}

// windowEnd is the reference calendar, written apart from the script's
// (with time.Date's normalisation, not days-from-civil): the end, in µs
// since 2024, of b's window that holds now.
func windowEnd(b limiter.Bucket, now int64) float64 {
	a := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	if !b.Anchor.IsZero() {
		a = b.Anchor.UTC()
	}
	t := time.UnixMicro(now + 1704067200*1_000_000).UTC()
	us := func(x time.Time) float64 { return float64(x.UnixMicro() - 1704067200*1_000_000) }
	floorDiv := func(x, y int) int {
		q := x / y
		if x%y != 0 && (x < 0) != (y < 0) {
			q--
		}
		return q
	}
	switch b.Window {
	case limiter.Daily, limiter.Weekly:
		l := 24 * time.Hour
		if b.Window == limiter.Weekly {
			l *= 7
		}
		d := t.Sub(a)
		k := d / l
		if d < 0 && d%l != 0 {
			k--
		}
		return us(a.Add((k + 1) * l))
	}
	step := 1
	if b.Window == limiter.Yearly {
		step = 12
	}
	start := func(k int) time.Time {
		mi := int(a.Month()) - 1 + k
		y, mo := a.Year()+floorDiv(mi, 12), time.Month(mi-floorDiv(mi, 12)*12+1)
		days := time.Date(y, mo+1, 0, 0, 0, 0, 0, time.UTC).Day()
		return time.Date(y, mo, min(a.Day(), days), a.Hour(), a.Minute(), a.Second(), 0, time.UTC)
	}
	k := floorDiv((t.Year()-a.Year())*12+int(t.Month())-int(a.Month()), step) * step
	if start(k).After(t) {
		k -= step
	}
	return us(start(k + step))
}

const (
	eps   = 1e-6
	maxMS = 3153600000000 // the script's MAX_MS
)

// run plays a call at TIME now. A quota's key counts as its window while
// TIME is before the window's end, or, at qnow < now, while the script's
// start was: Redis expires keys by the time the script started, to the
// millisecond, and the key's PXAT is the window's end less 1 ms, so a call
// that starts before the end and reads TIME after it counts in the window
// that ended, unless it reads the key's expiry (see bucket.lua, "Quotas").
func (m *model) run(bs []limiter.Bucket, s snapshot, cost, now, qnow int64) {
	*m = model{cost: cost, now: now, allowed: true, lim: -1, wait: -2}
	fnow := float64(now)
	need := float64(max(cost, 1))
	for i, b := range bs {
		at, h, T, burst := fnow, 0.0, 0.0, 0.0
		needI := need + float64(b.MinRemaining)
		if b.Limit > 0 && b.Window != limiter.NoWindow {
			// A quota: its key's used while its window lasts, else a
			// fresh window; the end from the reference calendar.
			used, end := 0.0, windowEnd(b, now)
			if s.has[i] && s.per[i] == -1 && s.num[i] > fnow {
				used = s.cap[i]
			} else if s.has[i] && s.per[i] == -1 && s.num[i] > float64(qnow) {
				used, end = s.cap[i], s.num[i]
			} else if end-fnow < 1000 {
				// A window without a key counts its last millisecond in
				// the next window (bucket.lua).
				end = windowEnd(b, int64(end))
			}
			at, h, T, burst = end, float64(b.Limit)-used, -1, float64(b.Limit)
			m.quota[i] = true
		} else if b.Limit > 0 {
			T = float64(b.Period.Microseconds()) / float64(b.Limit)
			burst = float64(b.Limit)
			if b.Burst > 0 {
				burst = float64(b.Burst)
			}
			if s.has[i] {
				tat, ts, bs, valid := s.num[i], s.per[i], s.cap[i], true
				if ts == 0 && bs == 0 {
					ts, bs = T, burst // the previous version's "<tat>": today's numbers
				} else {
					valid = ts > 0 && bs > 0 && !math.IsInf(ts, 1) && !math.IsInf(bs, 1)
				}
				if valid && tat > at {
					at = tat
					if ts != T || bs != burst {
						// New numbers: what was used carries over, at most
						// the new burst, and is written even on a deny.
						used := float64((at - fnow) / ts)
						used = min(used, burst)
						at = fnow + float64(used*T)
						m.converted[i] = true
						if cost > 0 {
							m.next[i], m.written[i] = at, true
							m.ttl[i] = min(int64(math.Ceil((at-fnow)/1000))+1, maxMS)
						}
					}
				}
			}
			h = float64((fnow-at)/T) + burst
		}
		m.at[i], m.h[i], m.t[i], m.burst[i] = at, h, T, burst
		if h+eps >= needI {
			continue
		}
		if b.Shadow {
			m.mask |= 1 << i
			continue
		}
		m.allowed = false
		w := int64(-1)
		if T < 0 && needI <= burst {
			w = min(max(int64(math.Ceil((at-fnow)/1000)), 1), maxMS)
		} else if T > 0 && needI <= burst {
			w = int64(math.Ceil((float64(at+float64((needI-burst)*T)) - fnow) / 1000))
			w = min(max(w, 1), maxMS)
		}
		if m.wait != -1 && (w == -1 || w > m.wait) {
			m.lim, m.wait = i, w
		}
	}
	if !m.allowed {
		return
	}
	m.wait = 0
	for i, b := range bs {
		if cost > 0 && m.t[i] > 0 && m.h[i]+eps >= float64(cost) {
			m.at[i] = m.at[i] + float64(float64(cost)*m.t[i])
			m.h[i] -= float64(cost)
			m.next[i], m.charged[i], m.written[i] = m.at[i], true, true
			m.ttl[i] = min(int64(math.Ceil((m.at[i]-fnow)/1000))+1, maxMS)
		} else if cost > 0 && m.t[i] < 0 && m.h[i]+eps >= float64(cost) {
			m.h[i] -= float64(cost)
			m.next[i], m.charged[i], m.written[i] = m.at[i], true, true
		}
		if !b.Shadow && (m.lim < 0 || m.h[i] < m.h[m.lim]) {
			m.lim = i
		}
	}
	if m.lim < 0 {
		for i := range bs {
			if m.lim < 0 || m.h[i] < m.h[m.lim] {
				m.lim = i
			}
		}
	}
}

// remaining is bucket i's whole tokens left.
func (m *model) remaining(i int) int64 { return max(int64(math.Floor(m.h[i]+eps)), 0) }

// reset is the milliseconds until bucket i is full.
func (m *model) reset(i int) int64 {
	if m.t[i] == 0 {
		return 0
	}
	return min(max(int64(math.Ceil((m.at[i]-float64(m.now))/1000)), 0), maxMS)
}

// decision is the Decision Allow documents for the model's reply.
func (m *model) decision(bs []limiter.Bucket) limiter.Decision {
	b := bs[m.lim]
	d := limiter.Decision{
		Allowed:      m.allowed,
		Limit:        b.Limit,
		Remaining:    m.remaining(m.lim),
		Reset:        ms(m.reset(m.lim)),
		Bucket:       m.lim,
		ShadowDenied: m.mask,
	}
	switch {
	case m.allowed:
	case m.wait < 0:
		d.RetryAfter = b.Period
	default:
		d.RetryAfter = ms(m.wait)
	}
	return d
}
