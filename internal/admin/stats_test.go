package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/stats"
)

func TestStatsRoute(t *testing.T) {
	t.Parallel()
	st := stats.New(stats.Options{})
	for range 3 {
		st.Record(stats.Decision{Rule: "r1", API: "demo", SubjectHash: "aa11"})
	}
	st.Record(stats.Decision{Rule: "r2", API: "demo", Allowed: true})
	h := pinnedHandler(admin.New(mustMemory(), nil, nil, admin.Options{Stats: st}), admin.RouteStats)
	get := func(kv ...string) (int, []byte) {
		t.Helper()
		resp, err := h(context.Background(), withQuery(event(admin.RouteStats, nil, ""), kv...))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, []byte(resp.Body)
	}

	var rep admin.StatsResponse
	resp, _ := h(context.Background(), withQuery(event(admin.RouteStats, nil, ""), "window", "5m", "top", "1"))
	want(t, resp, 200, &rep)
	if rep.Source != "in-process" || rep.Window != "5m0s" || rep.MaxWindow != "15m" || len(rep.Rules) != 1 || rep.Rules[0].Rule != "r1" || rep.Rules[0].Denied != 3 ||
		len(rep.Subjects) != 1 || rep.Subjects[0].Subject != "aa11" || len(rep.Series) != 5 {
		t.Errorf("GET /stats?window=5m&top=1 = %+v", rep)
	}
	resp, _ = h(context.Background(), event(admin.RouteStats, nil, ""))
	want(t, resp, 200, &rep)
	if rep.Window != admin.DefaultStatsWindow.String() || len(rep.Rules) != 2 {
		t.Errorf("GET /stats = window %s, %d rules; want the default window and both rules", rep.Window, len(rep.Rules))
	}

	bad := []struct {
		query []string
		field string
	}{
		{[]string{"window", "5"}, "window"},
		{[]string{"window", "soon"}, "window"},
		{[]string{"window", "30s"}, "window"},
		{[]string{"window", "90s"}, "window"},
		{[]string{"window", "16m"}, "window"}, // past the in-process 15m
		{[]string{"window", "-5m"}, "window"},
		{[]string{"top", "0"}, "top"},
		{[]string{"top", "101"}, "top"},
		{[]string{"top", "x"}, "top"},
		{[]string{"windows", "5m"}, "windows"},
	}
	for _, b := range bad {
		resp, _ := h(context.Background(), withQuery(event(admin.RouteStats, nil, ""), b.query...))
		p := wantProblem(t, resp, 400)
		if len(p.Errors) != 1 || p.Errors[0].Field != b.field {
			t.Errorf("GET /stats?%v: errors %+v, want one naming %q", b.query, p.Errors, b.field)
		}
	}
	if code, body := get("window", "15m"); code != 200 {
		t.Errorf("GET /stats?window=15m = %d %s, want 200", code, body)
	}

	// Without a source: 503, but a bad window is still the client's 400.
	none := pinnedHandler(admin.New(mustMemory(), nil, nil, admin.Options{}), admin.RouteStats)
	resp, _ = none(context.Background(), event(admin.RouteStats, nil, ""))
	wantProblem(t, resp, 503)
	resp, _ = none(context.Background(), withQuery(event(admin.RouteStats, nil, ""), "window", "x"))
	wantProblem(t, resp, 400)
}

// slowStats is a source that outlives the caller's deadline.
type slowStats struct{}

func (slowStats) MaxWindow() time.Duration { return time.Hour }
func (slowStats) TopContributors(ctx context.Context, _ time.Duration, _ int) (stats.Report, error) {
	<-ctx.Done()
	return stats.Report{}, ctx.Err()
}

func TestStatsSourceTimeout(t *testing.T) {
	t.Parallel()
	h := pinnedHandler(admin.New(mustMemory(), nil, nil, admin.Options{Stats: slowStats{}}), admin.RouteStats)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	resp, _ := h(ctx, withQuery(event(admin.RouteStats, nil, ""), "window", "60m"))
	if resp.StatusCode != 503 || resp.Headers["Retry-After"] != "1" {
		t.Errorf("slow source = %d %v, want 503 with Retry-After", resp.StatusCode, resp.Headers)
	}
}
