package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/testenv"
)

// readCounter is a real store that counts the rules the admin reads and
// the loads of the whole table.
type readCounter struct {
	store.Store
	rows  atomic.Int64
	loads atomic.Int64
}

func (c *readCounter) ListRules(ctx context.Context, f rules.Filter) (rules.Page, error) {
	p, err := c.Store.ListRules(ctx, f)
	c.rows.Add(int64(len(p.Rules)))
	return p, err
}

func (c *readCounter) LoadAll(ctx context.Context) (rules.Set, error) {
	c.loads.Add(1)
	return c.Store.LoadAll(ctx)
}

// TestSubjectsReadOnlyWhatApplies: the subjects routes read the rules of
// the subject and of every subject (*), never the whole table, and list
// the rules the authorizers' full snapshot gives, for random rule sets.
func TestSubjectsReadOnlyWhatApplies(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	def := &rules.Effective{Limit: 7, Period: time.Minute}
	for round := range 5 {
		mem := memory.New()
		st := &readCounter{Store: mem}
		prefix := testenv.Prefix(t, "admin")
		testenv.DeleteKeys(t, rdb, prefix)
		svc := admin.New(st, nil, limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: 2 * time.Second}), admin.Options{Default: def})
		h := lambdaHandler(svc)
		if _, err := mem.CreatePlan(ctx, rules.Plan{Name: "gold", Limit: 10, Period: rules.Period(time.Minute)}, "test"); err != nil {
			t.Fatal(err)
		}
		apis := []string{"*", "a1", "a2", "a3"}
		routes := []string{"*", "GET /x", "ANY /x", "POST /y/{id}", "GET /z"}
		subjects := []string{"*", "alice", "bob", "carol"}
		for range 60 {
			r := rules.Rule{API: apis[rng.IntN(len(apis))], Route: routes[rng.IntN(len(routes))], Subject: subjects[rng.IntN(len(subjects))]}
			if rng.IntN(3) == 0 {
				r.Plan = "gold"
			} else {
				r.Limit, r.Period = new(int64(1+rng.Int64N(100))), rules.Period(time.Minute)
			}
			if rng.IntN(8) == 0 {
				r.Enabled = new(false)
			}
			_, _ = mem.CreateRule(ctx, r, "test") // a taken scope is a conflict: skip it
		}
		// Many rules of other subjects, which must not be read.
		for i := range 300 {
			r := rules.Rule{API: apis[1+i%3], Route: "GET /x", Subject: fmt.Sprintf("other-%d", i), Limit: new(int64(5)), Period: rules.Period(time.Second)}
			if _, err := mem.CreateRule(ctx, r, "test"); err != nil {
				t.Fatal(err)
			}
		}
		set, err := mem.LoadAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		full := rules.NewSnapshot(set.Rules, set.Plans, rules.SnapshotOptions{Default: def})

		for _, subject := range []string{"alice", "bob", "*", "nobody"} {
			for _, api := range []string{"a1", "a2", "unnamed"} { // "*" names no one API: a 400 (TestSubjects)
				for _, route := range []string{"", "*", "GET /x", "POST /y/{id}", "DELETE /none"} {
					q := []string{"api", api}
					if route != "" {
						q = append(q, "route", route)
					}
					before := st.rows.Load()
					resp, err := h(ctx, withQuery(event(admin.RouteSubjectLimits, map[string]string{"subject": pathEscape(subject)}, ""), q...))
					if err != nil {
						t.Fatal(err)
					}
					var got admin.SubjectLimitsResponse
					want(t, resp, 200, &got)
					var gotIDs, wantIDs []string
					for _, l := range got.Limits {
						gotIDs = append(gotIDs, l.Rule)
					}
					for _, e := range full.ForSubject(subject, api, route) {
						wantIDs = append(wantIDs, e.ID)
					}
					// As sets: the full snapshot walks the routes other
					// subjects' rules name too, which may order the same
					// rules differently.
					slices.Sort(gotIDs)
					slices.Sort(wantIDs)
					if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
						t.Errorf("round %d: limits of %q on api %q route %q (-full snapshot +got):\n%s", round, subject, api, route, diff)
					}
					// What was read: the rules of subject and *, on api and *.
					var applicable int64
					for _, r := range set.Rules {
						if (r.Subject == subject || r.Subject == "*") && (r.API == api || r.API == "*") {
							applicable++
						}
					}
					if read := st.rows.Load() - before; read != applicable {
						t.Errorf("round %d: limits of %q on api %q read %d rules, want the %d that may apply", round, subject, api, read, applicable)
					}
				}
			}
			// Every api: the same rules as the full snapshot, as a set (the
			// order follows the apis named, which the full snapshot has
			// more of), and the default when a request to an api no rule
			// names would fall to it.
			var got admin.SubjectLimitsResponse
			resp, _ := h(ctx, event(admin.RouteSubjectLimits, map[string]string{"subject": pathEscape(subject)}, ""))
			want(t, resp, 200, &got)
			var gotIDs, wantIDs []string
			for _, l := range got.Limits {
				gotIDs = append(gotIDs, l.Rule)
			}
			for _, e := range full.ForSubject(subject, "", "") {
				if e.ID != rules.DefaultID {
					wantIDs = append(wantIDs, e.ID)
				}
			}
			if full.Match("unnamed", "GET", "/nowhere", subject).Default {
				wantIDs = append(wantIDs, rules.DefaultID)
			}
			slices.Sort(gotIDs)
			slices.Sort(wantIDs)
			if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
				t.Errorf("round %d: limits of %q on every api (-want +got):\n%s", round, subject, diff)
			}
			resp, _ = h(ctx, event(admin.RouteResetSubject, map[string]string{"subject": pathEscape(subject)}, ""))
			want(t, resp, 204, nil)
		}
		if n := st.loads.Load(); n != 0 {
			t.Errorf("round %d: the subjects routes loaded the whole table %d times, want never", round, n)
		}
	}
}

// TestSubjectsTooManyRules: more than admin.MaxSubjectRules rules that may
// apply is a 400 naming the way out, not an unbounded walk; narrowing with
// ?api= answers.
func TestSubjectsTooManyRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memory.New()
	h := lambdaHandler(admin.New(mem, nil, testLimiter(t, "admin"), admin.Options{}))
	for i := range admin.MaxSubjectRules + 1 {
		r := rules.Rule{API: fmt.Sprintf("api-%d", i%2), Route: fmt.Sprintf("GET /r%d", i), Subject: "*", Limit: new(int64(5)), Period: rules.Period(time.Second)}
		if _, err := mem.CreateRule(ctx, r, "test"); err != nil {
			t.Fatal(err)
		}
	}
	for _, route := range []string{admin.RouteSubjectLimits, admin.RouteResetSubject} {
		resp, err := h(ctx, event(route, map[string]string{"subject": "alice"}, ""))
		if err != nil {
			t.Fatal(err)
		}
		p := wantProblem(t, resp, 400)
		if !strings.Contains(p.Detail, "?api=") {
			t.Errorf("%s with %d rules: detail %q, want it to name ?api=", route, admin.MaxSubjectRules+1, p.Detail)
		}
	}
	resp, err := h(ctx, withQuery(event(admin.RouteResetSubject, map[string]string{"subject": "alice"}, ""), "api", "api-0"))
	if err != nil {
		t.Fatal(err)
	}
	want(t, resp, 204, nil)
}

// TestSubjectsDimension: ?dimension=ip shows (and resets) the rules of the
// ip dimension for an IP subject; without it, the default dimension's.
func TestSubjectsDimension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memory.New()
	svc := admin.New(mem, nil, testLimiter(t, "admindim"), admin.Options{})
	h := lambdaHandler(svc)
	floor := rules.Rule{API: "api", Route: "*", Subject: "*", Limit: new(int64(50)), Period: rules.Period(time.Minute), Dimension: "ip"}
	perKey := rules.Rule{API: "api", Route: "*", Subject: "*", Limit: new(int64(10)), Period: rules.Period(time.Minute)}
	for _, r := range []rules.Rule{floor, perKey} {
		if _, err := mem.CreateRule(ctx, r, "test"); err != nil {
			t.Fatal(err)
		}
	}
	limits := func(q ...string) []admin.BucketLimit {
		t.Helper()
		resp, err := h(ctx, withQuery(event(admin.RouteSubjectLimits, map[string]string{"subject": "192.0.2.1"}, ""), q...))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("limits %v = %d %s, %v", q, resp.StatusCode, resp.Body, err)
		}
		var out admin.SubjectLimitsResponse
		if err := json.Unmarshal([]byte(resp.Body), &out); err != nil {
			t.Fatal(err)
		}
		return out.Limits
	}
	if l := limits("dimension", "ip"); len(l) != 1 || l[0].Limit != 50 {
		t.Errorf("limits ?dimension=ip = %+v, want the 50/1m floor", l)
	}
	if l := limits(); len(l) != 1 || l[0].Limit != 10 {
		t.Errorf("limits (default dimension) = %+v, want the 10/1m rule", l)
	}
	resp, _ := h(ctx, withQuery(event(admin.RouteSubjectLimits, map[string]string{"subject": "x"}, ""), "dimension", "Bad Name"))
	if resp.StatusCode != 400 {
		t.Errorf("?dimension=Bad Name = %d, want 400", resp.StatusCode)
	}
}
