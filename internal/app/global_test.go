package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/ledger/ledgertest"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestGlobalThroughInvoke: two Regions built from the environment as the
// Lambdas are (LEDGER_TABLE, LEDGER_ENDPOINT, GLOBAL_REGIONS), each with
// its own Redis keys and rules database, the same global quota written
// through each one's admin handler. The sample REST authorizer event's
// bytes through each authorizer's Invoke, taking turns, are allowed
// exactly the quota in all, and the subject view of either Region shows
// the ledger's count and nothing remaining. A refund through POST /usage
// gives nothing back (no usage was charged); a reset through one Region's
// DELETE /subjects/{s}/buckets starts the budget again for both.
func TestGlobalThroughInvoke(t *testing.T) {
	t.Parallel()
	const limit = 5
	endpoint, table := ledgertest.Table(t)
	sample, err := os.ReadFile("../../events/authorizer-rest.json")
	if err != nil {
		t.Fatal(err)
	}
	subject := "global-" + testenv.Random(t)
	payload := bytes.ReplaceAll(sample, []byte("demo-key-0001"), []byte(subject))

	type handler = func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	type region struct {
		invoke func() string
		admin  handler
		usage  handler
		reset  handler
		env    map[string]string
	}
	invoker := func(env map[string]string) func() string {
		authz, authzLog := newApp(t, env)
		logOnFailure(t, authzLog)
		return func() string {
			t.Helper()
			out, err := authz.Authorizer.Invoke(context.Background(), payload)
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			var r events.APIGatewayCustomAuthorizerResponse
			if err := json.Unmarshal(out, &r); err != nil || len(r.PolicyDocument.Statement) == 0 {
				t.Fatalf("Invoke = %s: %v", out, err)
			}
			return r.PolicyDocument.Statement[0].Effect
		}
	}
	var rs []region
	for _, name := range []string{"us-east-1", "us-west-2"} {
		env := map[string]string{"AWS_REGION": name,
			"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": pgtest.NewDatabase(t),
			"REDIS_PREFIX": testenv.Prefix(t, "global"), "REDIS_TIMEOUT": "250ms",
			"SUBJECT_HMAC_KEY": "a key every Region shares, 32 bytes or more",
			"LEDGER_TABLE":     table, "LEDGER_ENDPOINT": endpoint, "GLOBAL_REGIONS": "us-east-1,us-west-2",
			// A loaded machine's dynalite may take longer than 200 ms; a
			// take that times out would admit on the allowance.
			"LEDGER_TIMEOUT": "5s",
		}
		adm, admLog := newAdmin(t, env)
		write := adm.Handler(admin.RouteCreateRule)
		body, _ := json.Marshal(map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "kind": "quota", "limit": limit, "period": "1d", "global": true})
		resp, err := write(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Path: "/rules", Resource: "/rules",
			Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)})
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /rules = %d %s, %v", resp.StatusCode, resp.Body, err)
		}
		logOnFailure(t, admLog)
		// Built after the write, as a Lambda started since: its cold start
		// reads the snapshot the write published.
		rs = append(rs, region{admin: adm.Handler(admin.RouteSubjectLimits), usage: adm.Handler(admin.RouteUsage),
			reset: adm.Handler(admin.RouteResetSubject), invoke: invoker(env), env: env})
	}
	allowedOf := func() int {
		allowed := 0
		for i := range 4 * limit {
			if rs[i%2].invoke() == "Allow" {
				allowed++
			}
		}
		return allowed
	}
	if allowed := allowedOf(); allowed != limit {
		t.Errorf("%d of %d invocations over two Regions allowed, want the global quota, %d", allowed, 4*limit, limit)
	}
	query := map[string]string{"api": "a1b2c3d4e5"}
	for i, r := range rs {
		resp, err := r.admin(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodGet,
			Path: "/subjects/" + subject + "/limits", Resource: "/subjects/{subject}/limits",
			PathParameters: map[string]string{"subject": subject}, QueryStringParameters: query})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET limits = %d %s, %v", resp.StatusCode, resp.Body, err)
		}
		var view admin.SubjectLimitsResponse
		if err := json.Unmarshal([]byte(resp.Body), &view); err != nil || len(view.Limits) == 0 || view.Limits[0].Global == nil || view.Limits[0].Global.Used == nil {
			t.Fatalf("subject view %s: %v", resp.Body, err)
		}
		l := view.Limits[0]
		if *l.Global.Used != limit || l.Remaining != 0 || l.Global.Remaining == nil || *l.Global.Remaining != 0 {
			t.Errorf("Region %d's subject view: global used %d, remaining %d (%s); want used %d, nothing remaining in any Region", i, *l.Global.Used, l.Remaining, resp.Body, limit)
		}
	}
	// A refund of usage never charged gives no token back.
	body, _ := json.Marshal(map[string]any{"api": "a1b2c3d4e5", "route": "GET /pets", "subject": subject, "cost": -1000})
	if resp, err := rs[0].usage(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Path: "/usage", Resource: "/usage",
		Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)}); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /usage = %d %s, %v", resp.StatusCode, resp.Body, err)
	}
	fresh := []func() string{invoker(rs[0].env), invoker(rs[1].env)}
	if fresh[0]() != "Deny" || fresh[1]() != "Deny" {
		t.Error("after a refund of usage never charged, a Region allowed a request of a spent global quota")
	}
	// A reset through one Region starts the budget again in both (new
	// authorizers: a warm one asks the ledger again within 5 s).
	if resp, err := rs[1].reset(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodDelete,
		Path: "/subjects/" + subject + "/buckets", Resource: "/subjects/{subject}/buckets",
		PathParameters: map[string]string{"subject": subject}, QueryStringParameters: query}); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE buckets = %d %s, %v", resp.StatusCode, resp.Body, err)
	}
	rs[0].invoke, rs[1].invoke = invoker(rs[0].env), invoker(rs[1].env)
	if allowed := allowedOf(); allowed != limit {
		t.Errorf("after a reset through one Region, %d of %d invocations over two Regions allowed, want the quota again, %d", allowed, 4*limit, limit)
	}
}
