package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

type fixedSnapshot struct{ s *rules.Snapshot }

func (f fixedSnapshot) Snapshot(context.Context) *rules.Snapshot { return f.s }

// TestCheckContract runs POST /check, the check function's route on the
// admin API, through the contract: an allowed request, a denied one, a
// bad body and a wrong method.
func TestCheckContract(t *testing.T) {
	t.Parallel()
	lim := limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "check"), Timeout: 2 * time.Second})
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "r-search", API: "demo", Route: "GET /search", Subject: "*", Limit: new(int64(1)), Period: rules.Period(time.Minute)},
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
}
