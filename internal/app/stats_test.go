package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/stats"
)

// TestStatsPart: the admin-stats function's graph needs no Redis and no
// database (it runs outside the VPC), and answers GET /stats from the
// reader it is given, 503 without one.
func TestStatsPart(t *testing.T) {
	ev := events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/stats", Path: "/stats"}
	for _, tt := range []struct {
		name   string
		reader admin.StatsReader
		want   int
	}{{"no reader", nil, http.StatusServiceUnavailable}, {"a reader", stats.New(stats.Options{}), http.StatusOK}} {
		a := statsAdmin(t, tt.name, nil, tt.reader)
		resp, _ := a.Handler(admin.RouteStats)(context.Background(), ev)
		if resp.StatusCode != tt.want {
			t.Errorf("GET /stats with %s = %d %s, want %d", tt.name, resp.StatusCode, resp.Body, tt.want)
		}
		a.Close()
	}
}

// TestFindPart: the admin-stats function builds the Stats part
// with the subject hash key: no Redis, no database, and POST
// /subjects/find answers the keyed hash (the data path's, with the same
// key) and searches the reader's lists (searched: true); without the key
// it answers 503, as it cannot hash.
func TestFindPart(t *testing.T) {
	const key = "deployment-key-0123456789abcdef"
	hash := limiter.NewHasher([]byte(key)).SubjectHash("customer-42")
	st := stats.New(stats.Options{})
	st.Record(stats.Decision{Rule: "r1", API: "shop", SubjectHash: hash})
	ev := events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/subjects/find", Path: "/subjects/find",
		Body: `{"subject":"customer-42"}`, Headers: map[string]string{"Content-Type": "application/json"}}
	for _, tt := range []struct {
		name, key string
		want      int
	}{{"no key", "", http.StatusServiceUnavailable}, {"the key", key, http.StatusOK}} {
		a := statsAdmin(t, tt.name, map[string]string{"SUBJECT_HMAC_KEY": tt.key}, st)
		resp, _ := a.Handler(admin.RouteFindSubject)(context.Background(), ev)
		if resp.StatusCode != tt.want {
			t.Fatalf("POST /subjects/find with %s = %d %s, want %d", tt.name, resp.StatusCode, resp.Body, tt.want)
		}
		if tt.want == http.StatusOK {
			var got admin.FindSubjectResponse
			if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
				t.Fatal(err)
			}
			if got.Hash != hash || !got.Searched || !got.Found {
				t.Errorf("POST /subjects/find = %+v, want hash %s searched and found", got, hash)
			}
		}
		a.Close()
	}
}

// statsAdmin builds the admin-stats function's graph from env with
// reader, and fails unless it built neither Redis nor a store.
func statsAdmin(t *testing.T, name string, env map[string]string, reader admin.StatsReader) *app.Admin {
	t.Helper()
	cfg, err := config.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.NewAdmin(context.Background(), cfg, app.AdminStats, app.Options{Out: io.Discard, StatsReader: reader})
	if err != nil {
		t.Fatalf("New(Stats) with %s = %v, want no error without Redis or a database", name, err)
	}
	if a.Redis != nil || a.Store != nil {
		t.Errorf("New(Stats) built Redis %v, store %v; want neither", a.Redis, a.Store)
	}
	return a
}
