package local

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	authapigw "github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// denyingUpstream is a team authorizer that allows "Bearer ok" as user-1
// and denies anything else, its policies written with plain strings.
type denyingUpstream struct{}

func (denyingUpstream) Invoke(_ context.Context, event []byte) ([]byte, error) {
	var ev struct {
		MethodArn string            `json:"methodArn"`
		Headers   map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(event, &ev); err != nil {
		return nil, err
	}
	effect := "Deny"
	if ev.Headers["Authorization"] == "Bearer ok" {
		effect = "Allow"
	}
	return json.Marshal(map[string]any{"principalId": "user-1", "policyDocument": map[string]any{
		"Version": "2012-10-17", "Statement": map[string]any{"Action": "execute-api:Invoke", "Effect": effect, "Resource": ev.MethodArn}}})
}

// TestGatewayUpstreamDeny: the local gateway in front of the authorizer
// behind an upstream answers the upstream's Deny as API Gateway and the
// construct do, 401 without Retry-After, and its Allow with the backend.
func TestGatewayUpstreamDeny(t *testing.T) {
	t.Parallel()
	lim := limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "gwupstream"), Timeout: time.Second})
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "r-all", API: "*", Route: "*", Subject: "*", Limit: new(int64(100)), Period: rules.Period(time.Minute)},
	}, nil, rules.SnapshotOptions{})
	sources, _ := identity.ParseSources("principal")
	auth := authapigw.NewHandler(authorizer.New(localSnaps{snap}, lim, authorizer.Options{Sources: sources}),
		authapigw.Options{Logger: discardLogger(), Upstream: identity.NewUpstream(denyingUpstream{}, identity.UpstreamOptions{})})
	g := newGateway("demo", "local", demoResources, auth, discardLogger())
	for _, tc := range []struct {
		auth   string
		status int
	}{{"Bearer ok", http.StatusOK}, {"Bearer nope", http.StatusUnauthorized}} {
		req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/items/42", nil)
		req.Header.Set("Authorization", tc.auth)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, req)
		if w.Code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.auth, w.Code, w.Body, tc.status)
		}
		if tc.status == http.StatusUnauthorized && (w.Header().Get("Retry-After") != "" || hdr(w.Header(), "RateLimit") != "") {
			t.Errorf("%s: headers %v; an upstream's denial carries no Retry-After or RateLimit", tc.auth, w.Header())
		}
	}
}

type localSnaps struct{ s *rules.Snapshot }

func (s localSnaps) Snapshot(context.Context) *rules.Snapshot { return s.s }
