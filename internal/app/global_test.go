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
// the ledger's count.
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

	type region struct {
		invoke func() string
		admin  func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	}
	var rs []region
	for range 2 {
		env := map[string]string{
			"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": pgtest.NewDatabase(t),
			"REDIS_PREFIX": testenv.Prefix(t, "global"), "REDIS_TIMEOUT": "250ms",
			"SUBJECT_HMAC_KEY": "a key every Region shares, 32 bytes or more",
			"LEDGER_TABLE":     table, "LEDGER_ENDPOINT": endpoint, "GLOBAL_REGIONS": "us-east-1,us-west-2",
		}
		adm, admLog := newAdmin(t, env)
		write := adm.Handler(admin.RouteCreateRule)
		body, _ := json.Marshal(map[string]any{"api": "a1b2c3d4e5", "route": "*", "subject": "*", "kind": "quota", "limit": limit, "period": "1d", "global": true})
		resp, err := write(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodPost, Path: "/rules", Resource: "/rules",
			Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)})
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /rules = %d %s, %v", resp.StatusCode, resp.Body, err)
		}
		// Built after the write, as a Lambda started since: its cold start
		// reads the snapshot the write published.
		authz, authzLog := newApp(t, env)
		logOnFailure(t, admLog, authzLog)
		rs = append(rs, region{admin: adm.Handler(admin.RouteSubjectLimits), invoke: func() string {
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
		}})
	}
	allowed := 0
	for i := range 4 * limit {
		if rs[i%2].invoke() == "Allow" {
			allowed++
		}
	}
	if allowed != limit {
		t.Errorf("%d of %d invocations over two Regions allowed, want the global quota, %d", allowed, 4*limit, limit)
	}
	resp, err := rs[1].admin(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: http.MethodGet,
		Path: "/subjects/" + subject + "/limits", Resource: "/subjects/{subject}/limits",
		PathParameters: map[string]string{"subject": subject}, QueryStringParameters: map[string]string{"api": "a1b2c3d4e5"}})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET limits = %d %s, %v", resp.StatusCode, resp.Body, err)
	}
	var view admin.SubjectLimitsResponse
	if err := json.Unmarshal([]byte(resp.Body), &view); err != nil || len(view.Limits) == 0 || view.Limits[0].Global == nil || view.Limits[0].Global.Used == nil {
		t.Fatalf("subject view %s: %v", resp.Body, err)
	}
	if g := view.Limits[0].Global; *g.Used != limit {
		t.Errorf("subject view: global used %d, leased %d, want used %d", *g.Used, *g.Leased, limit)
	}
}
