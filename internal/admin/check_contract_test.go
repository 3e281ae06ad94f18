package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/rules"
)

type fixedSnapshot struct{ s *rules.Snapshot }

func (f fixedSnapshot) Snapshot(context.Context) *rules.Snapshot { return f.s }

// TestCheckContract runs POST /check, the check function's route on the
// admin API, through the contract: an allowed request, a denied one, a
// bad body and a wrong method.
func TestCheckContract(t *testing.T) {
	t.Parallel()
	lim := testLimiter(t, "check")
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "r-search", API: "demo", Route: "GET /search", Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Minute)},
		{ID: "r-exports", API: "demo", Route: "POST /exports", Subject: "*", Kind: rules.Concurrency, Limit: new(int64(1)), Period: rules.Period(time.Hour)},
	}, nil, rules.SnapshotOptions{})
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	check := apigw.NewCheck(authorizer.New(fixedSnapshot{snap}, lim, authorizer.Options{Logger: logger}), apigw.Options{Logger: logger})
	srv := newHTTPServer(t, http.StripPrefix("/admin", check))
	body := `{"subject":"alice","api":"demo","route":"GET /search"}`
	for _, c := range []struct {
		method, body string
		status       int
	}{
		{"POST", body, 200},
		{"POST", body, 429},
		{"POST", `{"subject":"alice","api":"demo","route":"GET /search","cost":-1,"x":1}`, 400},
		{"GET", "", 405},
	} {
		resp := httpDo(t, srv, c.method, "/admin/check", c.body, "Content-Type", "application/json")
		if resp.status != c.status {
			t.Errorf("%s /check %s = %d %s, want %d", c.method, c.body, resp.status, strings.TrimSpace(resp.body), c.status)
		}
	}

	// In flight: a check holds the one slot until its release.
	export := `{"subject":"alice","api":"demo","route":"POST /exports"}`
	first := httpDo(t, srv, "POST", "/admin/check", export, "Content-Type", "application/json")
	var got struct{ Slot string }
	if err := json.Unmarshal([]byte(first.body), &got); first.status != 200 || err != nil || got.Slot == "" {
		t.Fatalf("first export check = %d %s, want 200 with a slot", first.status, first.body)
	}
	release, _ := json.Marshal(map[string]string{"release": got.Slot})
	for _, c := range []struct {
		name, body string
		status     int
	}{
		{"second while held", export, 429},
		{"release", string(release), 204},
		{"after the release", export, 200},
		{"a forged slot", `{"release":"s1.00000000000000000000000000000000.eA"}`, 400},
		{"release with a subject", `{"release":"x","subject":"alice"}`, 400},
	} {
		resp := httpDo(t, srv, "POST", "/admin/check", c.body, "Content-Type", "application/json")
		if resp.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, resp.status, strings.TrimSpace(resp.body), c.status)
		}
	}
}
