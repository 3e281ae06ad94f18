package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRuleChangeBindsNextRequest: production's topology and defaults (an
// admin function and an authorizer function, separate apps sharing Redis
// and PostgreSQL, RULES_VERSION_POLL 1s). A subject blocked through the
// admin Lambda's handler after 3 s without traffic is denied on the very
// next authorizer invocation, and a second write right after the first
// (the block lifted) binds the first invocation a poll later: no
// debounce holds it back. Before, the first invocation after the quiet
// spell was decided on the old rules (Allow), and the second write waited
// the 1 s debounce.
func TestRuleChangeBindsNextRequest(t *testing.T) {
	t.Parallel()
	env := map[string]string{"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": pgtest.NewDatabase(t),
		// The local stack's budget: a loaded test machine is slower than a
		// VPC, and a version read that times out decides on the old rules.
		"REDIS_TIMEOUT": "250ms"}
	adm, admLog := newAdmin(t, env)
	authz, authzLog := newApp(t, env)
	logOnFailure(t, admLog, authzLog)
	admin := adm.Handler("")
	write := func(method, path string, body any) events.APIGatewayProxyResponse {
		t.Helper()
		ev := events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Resource: path,
			Headers: map[string]string{"Content-Type": "application/json", "If-Match": "*"}}
		if id, ok := strings.CutPrefix(path, "/rules/"); ok {
			ev.Resource, ev.PathParameters = "/rules/{id}", map[string]string{"id": id}
		}
		if body != nil {
			b, _ := json.Marshal(body)
			ev.Body = string(b)
		}
		resp, err := admin(context.Background(), ev)
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s %s = %d %s, %v", method, path, resp.StatusCode, resp.Body, err)
		}
		return resp
	}

	// The sample REST event (API a1b2c3d4e5, GET /orders/{id}) for a subject
	// of this test.
	sample, err := os.ReadFile("../../events/authorizer-rest.json")
	if err != nil {
		t.Fatal(err)
	}
	subject := "fresh-" + testenv.Random(t)
	payload := bytes.ReplaceAll(sample, []byte("demo-key-0001"), []byte(subject))
	invoke := func() string {
		t.Helper()
		out, err := authz.Authorizer.Invoke(context.Background(), payload)
		if err != nil {
			t.Fatalf("Invoke: %v", err)
		}
		var resp events.APIGatewayCustomAuthorizerResponse
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.PolicyDocument.Statement) == 0 {
			t.Fatalf("Invoke = %s: %v", out, err)
		}
		return resp.PolicyDocument.Statement[0].Effect
	}

	write(http.MethodPost, "/rules", map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "limit": 100, "period": "1m"})
	waitFor(t, 5*time.Second, "the first rule allows the subject", func() bool { return invoke() == "Allow" })

	time.Sleep(3 * time.Second) // sleep: the quiet spell, longer than the production RULES_VERSION_POLL (1s) the cache times on its own clock
	created := write(http.MethodPost, "/rules", map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": subject, "limit": 0, "period": "1m"})
	blocked := time.Now()
	if got := invoke(); got != "Deny" {
		t.Fatalf("first invocation after 3 s of quiet and a block = %s, want Deny", got)
	}
	t.Logf("block written, next invocation denied %v later", time.Since(blocked).Round(time.Millisecond))

	// Right after: lift it. The first invocation a poll (1s) later is
	// allowed; the one before may still see the block.
	var block struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(created.Body), &block); err != nil || block.ID == "" {
		t.Fatalf("created rule %s: %v", created.Body, err)
	}
	write(http.MethodDelete, "/rules/"+block.ID, nil)
	lifted := time.Now()
	invoke()
	time.Sleep(time.Until(lifted.Add(time.Second))) // sleep: no traffic until a production poll (1s) after the lift; traffic in between would start the checks itself
	if got := invoke(); got != "Allow" {
		t.Fatalf("first invocation a poll after the block was lifted = %s, want Allow", got)
	}
}
