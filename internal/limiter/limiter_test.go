package limiter

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// step is one call in a bucket-math scenario: Allow with cost (after
// sleeping), or, when peek is set, Peek.
type step struct {
	sleep time.Duration
	cost  int64
	want  Decision
	peek  []BucketState
}

// allowed and denied build the expected Decision of a step.
func allowed(bucket int, limit, remaining int64, reset time.Duration) Decision {
	return Decision{Allowed: true, Bucket: bucket, Limit: limit, Remaining: remaining, Reset: reset}
}

func denied(bucket int, limit, remaining int64, reset, retry time.Duration) Decision {
	return Decision{Bucket: bucket, Limit: limit, Remaining: remaining, Reset: reset, RetryAfter: retry}
}

func shadow(d Decision, mask uint32) Decision { d.ShadowDenied = mask; return d }

// durationsWithin compares durations with a tolerance: a scenario's clock is
// Redis TIME, which keeps moving between steps.
func durationsWithin(tol time.Duration) cmp.Option {
	return cmp.Comparer(func(a, b time.Duration) bool {
		d := a - b
		return d <= tol && d >= -tol
	})
}

type scenario struct {
	name    string
	buckets []Bucket
	steps   []step
	tol     time.Duration
}

// scenarios are deterministic up to the few milliseconds the steps take
// (hour-long periods); the refill scenarios sleep.
func scenarios() []scenario {
	const h = time.Hour
	s := time.Second
	a10 := Bucket{ID: "a", Limit: 10, Period: h}
	var exhaust []step
	for i := int64(9); i >= 0; i-- {
		exhaust = append(exhaust, step{cost: 1, want: allowed(0, 10, i, time.Duration(10-i)*360*s)})
	}
	return []scenario{
		{
			name:    "burst then deny",
			buckets: []Bucket{a10},
			steps: append(exhaust,
				step{cost: 1, want: denied(0, 10, 0, h, 360*s)},
				step{cost: 1, want: denied(0, 10, 0, h, 360*s)}),
		},
		{
			name:    "burst above limit",
			buckets: []Bucket{{ID: "b", Limit: 2, Period: h, Burst: 4}},
			steps: []step{
				{cost: 1, want: allowed(0, 2, 3, 1800*s)},
				{cost: 1, want: allowed(0, 2, 2, 3600*s)},
				{cost: 1, want: allowed(0, 2, 1, 5400*s)},
				{cost: 1, want: allowed(0, 2, 0, 7200*s)},
				{cost: 1, want: denied(0, 2, 0, 7200*s, 1800*s)},
			},
		},
		{
			name:    "cost above remaining",
			buckets: []Bucket{a10},
			steps: []step{
				{cost: 7, want: allowed(0, 10, 3, 2520*s)},
				{cost: 4, want: denied(0, 10, 3, 2520*s, 360*s)},
				{cost: 3, want: allowed(0, 10, 0, h)},
			},
		},
		{
			name:    "cost above burst never passes",
			buckets: []Bucket{a10},
			steps: []step{
				{cost: 11, want: denied(0, 10, 10, 0, h)},
				{peek: []BucketState{{Remaining: 10}}},
			},
		},
		{
			name:    "multi-bucket all or nothing",
			buckets: []Bucket{a10, {ID: "b", Limit: 2, Period: h}},
			steps: []step{
				{cost: 1, want: allowed(1, 2, 1, 1800*s)},
				{cost: 1, want: allowed(1, 2, 0, h)},
				{cost: 1, want: denied(1, 2, 0, h, 1800*s)},
				{cost: 1, want: denied(1, 2, 0, h, 1800*s)},
				// a was charged twice, not four times.
				{peek: []BucketState{{Remaining: 8, Reset: 720 * s}, {Remaining: 0, Reset: h}}},
			},
		},
		{
			name:    "deny charges no bucket",
			buckets: []Bucket{{ID: "a", Limit: 1, Period: h}, {ID: "b", Limit: 10, Period: h}},
			steps: []step{
				{cost: 1, want: allowed(0, 1, 0, h)},
				{cost: 1, want: denied(0, 1, 0, h, h)},
				{peek: []BucketState{{Remaining: 0, Reset: h}, {Remaining: 9, Reset: 360 * s}}},
			},
		},
		{
			name:    "shadow bucket reports but never denies",
			buckets: []Bucket{a10, {ID: "s", Limit: 1, Period: h, Shadow: true}},
			steps: []step{
				{cost: 1, want: allowed(0, 10, 9, 360*s)},
				{cost: 1, want: shadow(allowed(0, 10, 8, 720*s), 0b10)},
				{peek: []BucketState{{Remaining: 8, Reset: 720 * s}, {Remaining: 0, Reset: h}}},
			},
		},
		{
			name:    "only shadow buckets",
			buckets: []Bucket{{ID: "s", Limit: 1, Period: h, Shadow: true}},
			steps: []step{
				{cost: 1, want: allowed(0, 1, 0, h)},
				{cost: 1, want: shadow(allowed(0, 1, 0, h), 0b1)},
			},
		},
		{
			name:    "enforcing deny still reports shadows",
			buckets: []Bucket{{ID: "s", Limit: 1, Period: h, Shadow: true}, {ID: "a", Limit: 1, Period: h}},
			steps: []step{
				{cost: 1, want: allowed(1, 1, 0, h)},
				{cost: 1, want: shadow(denied(1, 1, 0, h, h), 0b1)},
			},
		},
		{
			name:    "blocked bucket denies",
			buckets: []Bucket{a10, {ID: "x", Limit: 0, Period: h}},
			steps: []step{
				{cost: 1, want: denied(1, 0, 0, 0, h)},
				{peek: []BucketState{{Remaining: 10}, {Remaining: 0}}},
			},
		},
		{
			name:    "blocked shadow bucket only reports",
			buckets: []Bucket{a10, {ID: "x", Limit: 0, Period: h, Shadow: true}},
			steps: []step{
				{cost: 1, want: shadow(allowed(0, 10, 9, 360*s), 0b10)},
			},
		},
		{
			name:    "peek charges nothing",
			buckets: []Bucket{a10},
			steps: []step{
				{cost: 0, want: allowed(0, 10, 10, 0)},
				{cost: 0, want: allowed(0, 10, 10, 0)},
				{cost: 1, want: allowed(0, 10, 9, 360*s)},
				{cost: 0, want: allowed(0, 10, 9, 360*s)},
				{peek: []BucketState{{Remaining: 9, Reset: 360 * s}}},
			},
		},
		{
			// 5 tokens per 200ms: one every 40ms.
			name:    "refill",
			buckets: []Bucket{{ID: "r", Limit: 5, Period: 200 * time.Millisecond}},
			tol:     25 * time.Millisecond,
			steps: []step{
				{cost: 5, want: allowed(0, 5, 0, 200*time.Millisecond)},
				{cost: 1, want: denied(0, 5, 0, 200*time.Millisecond, 40*time.Millisecond)},
				// 100ms later: 2.5 tokens.
				{sleep: 100 * time.Millisecond, cost: 1, want: allowed(0, 5, 1, 140*time.Millisecond)},
				{cost: 1, want: allowed(0, 5, 0, 180*time.Millisecond)},
				{cost: 1, want: denied(0, 5, 0, 180*time.Millisecond, 20*time.Millisecond)},
				// A full period later the bucket is full, not fuller.
				{sleep: 250 * time.Millisecond, cost: 0, want: allowed(0, 5, 5, 0)},
				{cost: 6, want: denied(0, 5, 5, 0, 200*time.Millisecond)},
				{cost: 5, want: allowed(0, 5, 0, 200*time.Millisecond)},
			},
		},
	}
}

// runScenario plays sc against l and reports every step that differs.
func runScenario(t *testing.T, l *Limiter, sub string, sc scenario) {
	t.Helper()
	ctx := context.Background()
	tol := sc.tol
	if tol == 0 {
		// These scenarios' times are minutes apart: a second tells a
		// wrong one from the steps' own run time, which under -race on a
		// loaded CI machine was once 51 ms.
		tol = time.Second
	}
	for i, st := range sc.steps {
		if st.sleep > 0 {
			time.Sleep(st.sleep) // sleep: the refill over Redis TIME (the scripts' clock) is what the step checks
		}
		if st.peek != nil {
			got, err := l.Peek(ctx, sub, sc.buckets)
			if err != nil {
				t.Fatalf("step %d: Peek: %v", i, err)
			}
			if diff := cmp.Diff(st.peek, got, durationsWithin(tol)); diff != "" {
				t.Errorf("step %d: Peek() mismatch (-want +got):\n%s", i, diff)
			}
			continue
		}
		got, err := l.Allow(ctx, Request{Subject: sub, Buckets: sc.buckets, Cost: st.cost})
		if err != nil {
			t.Fatalf("step %d: Allow(cost %d): %v", i, st.cost, err)
		}
		if diff := cmp.Diff(st.want, got, durationsWithin(tol)); diff != "" {
			t.Errorf("step %d: Allow(cost %d) mismatch (-want +got):\n%s", i, st.cost, diff)
		}
	}
}

func TestBucketMath(t *testing.T) {
	c := newClient(t, 4)
	l := New(c, Options{Prefix: testPrefix(t, c), DenyCacheSize: -1, Timeout: testTimeout})
	for i, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			runScenario(t, l, subject(t, i), sc)
		})
	}
	if s := l.Stats(); s.Errors != 0 || s.FailOpen != 0 {
		t.Errorf("Stats() = %+v, want no errors", s)
	}
}

func TestBlockedBucketSkipsRedis(t *testing.T) {
	// No Redis behind this client: a blocked bucket must not need one.
	l := New(deadClient(t), Options{})
	b := []Bucket{{ID: "a", Limit: 10, Period: time.Minute}, {ID: "x", Limit: 0, Period: time.Minute}}
	got, err := l.Allow(context.Background(), Request{Subject: "s", Buckets: b, Cost: 1})
	want := Decision{Bucket: 1, RetryAfter: time.Minute}
	if err != nil || got != want {
		t.Errorf("Allow(blocked) = %+v, %v, want %+v, nil", got, err, want)
	}
	if s := l.Stats(); s.RedisCalls != 0 || s.Blocked != 1 || s.Denied != 1 {
		t.Errorf("Stats() = %+v, want 0 Redis calls, 1 blocked, 1 denied", s)
	}
}

// TestBlockUntil: a block that ends (an expiring rule of limit 0) tells
// a denied request to retry when it ends, not after the rule's period.
func TestBlockUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(deadClient(t), Options{})
		for _, tc := range []struct {
			until time.Time
			want  time.Duration
		}{
			{time.Now().Add(150 * time.Second), 150 * time.Second},
			{time.Now().Add(1500*time.Microsecond + 1), 2 * time.Millisecond}, // rounded up
			{time.Now().Add(-time.Second), time.Millisecond},                  // ended meanwhile
			{time.Time{}, time.Minute},                                        // no end: the period
		} {
			b := []Bucket{{ID: "x", Limit: 0, Period: time.Minute, Until: tc.until}}
			got, err := l.Allow(context.Background(), Request{Subject: "s", Buckets: b, Cost: 1})
			if err != nil || got.Allowed || got.RetryAfter != tc.want {
				t.Errorf("Allow(blocked until %v) = %+v, %v, want RetryAfter %v", tc.until, got, err, tc.want)
			}
		}
	})
}

func TestInvalidRequest(t *testing.T) {
	l := New(deadClient(t), Options{})
	ok := Bucket{ID: "a", Limit: 1, Period: time.Second}
	nine := make([]Bucket, MaxBuckets+1)
	for i := range nine {
		nine[i] = ok
	}
	for _, r := range []Request{
		{Subject: "s", Cost: 1},
		{Subject: "s", Buckets: nine, Cost: 1},
		{Subject: "s", Buckets: []Bucket{ok}, Cost: -1},
		{Subject: "s", Buckets: []Bucket{{Limit: 1, Period: time.Second}}, Cost: 1},
		{Subject: "s", Buckets: []Bucket{{ID: "a", Limit: -1, Period: time.Second}}, Cost: 1},
		{Subject: "s", Buckets: []Bucket{{ID: "a", Limit: 1}}, Cost: 1},
	} {
		got, err := l.Allow(context.Background(), r)
		if !errors.Is(err, ErrInvalidRequest) || got.Allowed {
			t.Errorf("Allow(%+v) = %+v, %v, want a deny and ErrInvalidRequest", r, got, err)
		}
	}
}

func TestKeysExpireWhenFull(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	l := New(c, Options{Prefix: prefix, Timeout: testTimeout})
	ctx := context.Background()
	b := []Bucket{{ID: "a", Limit: 10, Period: time.Hour}, {ID: "b", Limit: 100, Period: time.Second, Burst: 200}}

	// A peek of a fresh subject creates nothing.
	if _, err := l.Peek(ctx, "fresh", b); err != nil {
		t.Fatalf("Peek: %v", err)
	}
	if _, err := l.Allow(ctx, Request{Subject: "fresh", Buckets: b, Cost: 0}); err != nil {
		t.Fatalf("Allow(cost 0): %v", err)
	}
	if keys := testenv.Keys(ctx, t, c, prefix); len(keys) != 0 {
		t.Errorf("keys after peeks = %q, want none", keys)
	}

	if _, err := l.Allow(ctx, Request{Subject: "s", Buckets: b, Cost: 3}); err != nil {
		t.Fatalf("Allow: %v", err)
	}
	for _, tc := range []struct {
		id   string
		want time.Duration // until full again; the key lives 1ms more
	}{
		{"a", 3 * 360 * time.Second},
		{"b", 30 * time.Millisecond},
	} {
		key := prefix + "{" + SubjectHash("s") + "}:" + tc.id
		got, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", key, err)
		}
		if got > tc.want+time.Millisecond || got < tc.want-50*time.Millisecond {
			t.Errorf("PTTL(%s) = %v, want about %v", key, got, tc.want)
		}
	}
	// Full again 30ms after the charge, bucket b's key is gone then.
	testenv.Await(t, time.Second, 5*time.Millisecond, "bucket b's key gone once full again", func() bool {
		n, err := c.Exists(ctx, prefix+"{"+SubjectHash("s")+"}:b").Result()
		return err == nil && n == 0
	})
}

// TestNoScriptRecovery flushes the script cache of a private Redis (the
// shared test one has other users).
func TestNoScriptRecovery(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	l := New(c, Options{Prefix: testPrefix(t, c), Timeout: testTimeout})
	ctx := context.Background()
	req := Request{Subject: "s", Buckets: []Bucket{{ID: "a", Limit: 10, Period: time.Hour}}, Cost: 1}
	for i := int64(0); i < 3; i++ {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
		got, err := l.Allow(ctx, req)
		if err != nil || !got.Allowed || got.Remaining != 9-i {
			t.Errorf("Allow after SCRIPT FLUSH = %+v, %v, want allowed with %d left", got, err, 9-i)
		}
	}
	if ok, err := c.ScriptExists(ctx, chargeFor(req.Buckets).Hash()).Result(); err != nil || !ok[0] {
		t.Errorf("SCRIPT EXISTS after recovery = %v, %v, want true", ok, err)
	}
	if s := l.Stats(); s.Errors != 0 {
		t.Errorf("Stats().Errors = %d, want 0", s.Errors)
	}
}

// TestScriptPerOperation runs each operation on a private Redis (the
// shared test one has other users) whose script cache starts empty, and
// checks which scripts it loaded: every operation is a script of its own,
// and a decision loads and runs the charge alone (charge_one.lua for one
// token bucket), in one EVALSHA.
func TestScriptPerOperation(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	l := New(c, Options{Prefix: testPrefix(t, c), Timeout: time.Second, DenyCacheSize: -1})
	ctx := context.Background()
	bs := []Bucket{{ID: "r", Limit: 1000, Period: time.Hour}, {ID: "q", Limit: 1000, Period: time.Hour, Window: Monthly}}
	scripts := []struct {
		name string
		s    *redis.Script
	}{{"charge", chargeScript}, {"charge one", chargeOneScript}, {"peek", peekScript}, {"usage", usageScript}, {"lease", leaseScript}, {"lease return", leaseReturnScript}}
	hashes := make([]string, len(scripts))
	for i, sc := range scripts {
		hashes[i] = sc.s.Hash()
		for _, h := range hashes[:i] {
			if h == hashes[i] {
				t.Fatalf("the %s script is another operation's (SHA %s)", sc.name, h)
			}
		}
	}
	loaded := func() []string {
		t.Helper()
		ok, err := c.ScriptExists(ctx, hashes...).Result()
		if err != nil {
			t.Fatalf("SCRIPT EXISTS: %v", err)
		}
		var names []string
		for i, in := range ok {
			if in {
				names = append(names, scripts[i].name)
			}
		}
		return names
	}
	allow := func(cost int64) error {
		_, err := l.Allow(ctx, Request{Subject: "s", Buckets: bs, Cost: cost})
		return err
	}
	steps := []struct {
		name string
		do   func() error
		want []string
	}{
		{"Allow, one token bucket", func() error {
			_, err := l.Allow(ctx, Request{Subject: "s", Buckets: bs[:1], Cost: 1})
			return err
		}, []string{"charge one"}},
		{"Allow", func() error { return allow(1) }, []string{"charge", "charge one"}},
		{"Allow, cost 0", func() error { return allow(0) }, []string{"charge", "charge one", "peek"}},
		{"Peek", func() error { _, err := l.Peek(ctx, "s", bs); return err }, []string{"charge", "charge one", "peek"}},
		{"Charge", func() error { _, err := l.Charge(ctx, "s", bs, 1, "scope", ""); return err }, []string{"charge", "charge one", "peek", "usage"}},
		{"a lease's charge", func() error { _, err := l.evalLease(ctx, digestOf("s"), 4, bs); return err }, []string{"charge", "charge one", "peek", "usage", "lease"}},
		{"a lease's return", func() error { _, err := l.returnTokens(ctx, digestOf("s"), bs, nil, 1); return err },
			[]string{"charge", "charge one", "peek", "usage", "lease", "lease return"}},
	}
	if got := loaded(); len(got) != 0 {
		t.Fatalf("scripts loaded before any call: %v", got)
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, loaded()); diff != "" {
			t.Errorf("scripts loaded after %s (-want +got):\n%s", st.name, diff)
		}
	}

	// With every script loaded, a decision sends one command: EVALSHA.
	var sent []string
	c.AddHook(sentHook{&sent})
	if err := allow(1); err != nil {
		t.Fatal(err)
	}
	if want := []string{"evalsha"}; !cmp.Equal(sent, want) {
		t.Errorf("commands sent by one Allow = %q, want %q", sent, want)
	}
}

// sentHook records the name of every command a client sends.
type sentHook struct{ names *[]string }

func (h sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		*h.names = append(*h.names, cmd.Name())
		return next(ctx, cmd)
	}
}

func (h sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			*h.names = append(*h.names, cmd.Name())
		}
		return next(ctx, cmds)
	}
}

func TestNoRawSubjectInKeys(t *testing.T) {
	c := newClient(t, 2)
	prefix := testPrefix(t, c)
	l := New(c, Options{Prefix: prefix, Timeout: testTimeout})
	ctx := context.Background()
	subjects := []string{"sk_live_abc123", "user@example.com", "has space", "{tag}", "a:b:c", "ünïcödé", "*", ""}
	b := []Bucket{{ID: "r1", Limit: 10, Period: time.Hour}, {ID: "r2", Limit: 10, Period: time.Hour}}
	for _, s := range subjects {
		if _, err := l.Allow(ctx, Request{Subject: s, Buckets: b, Cost: 1}); err != nil {
			t.Fatalf("Allow(%q): %v", s, err)
		}
	}
	keys := testenv.Keys(ctx, t, c, prefix)
	if len(keys) != 2*len(subjects) {
		t.Errorf("got %d keys, want %d: %q", len(keys), 2*len(subjects), keys)
	}
	shape := regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `\{[0-9a-f]{32}\}:r[12]$`)
	for _, k := range keys {
		if !shape.MatchString(k) {
			t.Errorf("key %q does not match %s", k, shape)
		}
		rest := strings.TrimPrefix(k, prefix)
		for _, s := range subjects {
			if len(s) > 1 && strings.Contains(rest, s) {
				t.Errorf("key %q contains the raw subject %q", k, s)
			}
		}
	}
}

func TestSubjectHash(t *testing.T) {
	// HMAC-SHA256("", "abc") = fd7adb152c05ef80dccf50a1fa4c05d5… (Python's
	// hmac.new(b"", b"abc", hashlib.sha256)).
	if got, want := SubjectHash("abc"), "fd7adb152c05ef80dccf50a1fa4c05d5"; got != want {
		t.Errorf("SubjectHash(%q) = %q, want %q", "abc", got, want)
	}
}
