package apigw_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/rules"
)

// TestHeaderDialects denies a third request on a 2-a-minute rule under
// every header dialect: the REST context carries every key the dialect's
// gateway response maps, and the check API's 429 sends the same fields with
// Retry-After.
func TestHeaderDialects(t *testing.T) {
	t.Parallel()
	order := rules.Rule{ID: "r-order", API: "a1b2c3", Route: "GET /orders/{id}", Subject: "*", Limit: new(int64(2)), Period: rules.Period(time.Minute)}
	tests := []struct {
		dialects headers.Dialects
		want     map[string]string // the fields besides X-RateLimit-Reset
		resetAt  bool              // X-RateLimit-Reset: now + 60 s
	}{
		{0, map[string]string{"RateLimit-Policy": `"r-order";q=2;w=60`, "RateLimit": `"r-order";r=0;t=60`}, false},
		{headers.Draft11, map[string]string{"RateLimit-Policy": `"r-order";q=2;w=60`, "RateLimit": `"r-order";r=0;t=60`}, false},
		{headers.Draft6, map[string]string{"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "60"}, false},
		{headers.Legacy, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0"}, true},
		{headers.Draft11 | headers.Draft6 | headers.Legacy, map[string]string{
			"RateLimit-Policy": `"r-order";q=2;w=60`, "RateLimit": `"r-order";r=0;t=60`,
			"RateLimit-Limit": "2", "RateLimit-Remaining": "0", "RateLimit-Reset": "60",
			"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0"}, true},
	}
	for _, tt := range tests {
		name := tt.dialects.String()
		if name == "" {
			name = "unset"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a := decision(redisLimiter(t, "hdr"), authorizer.Options{}, order)
			o := apigw.Options{Logger: slog.New(slog.DiscardHandler), Headers: tt.dialects}
			auth, check := apigw.NewHandler(a, o), apigw.NewCheck(a, o)
			dialects := tt.dialects
			if dialects == 0 {
				dialects = headers.Default
			}

			before := time.Now()
			var resp events.APIGatewayCustomAuthorizerResponse
			for i := 0; i < 3; i++ {
				var err error
				if resp, err = auth.REST(ctx, restEvent("k1")); err != nil {
					t.Fatal(err)
				}
			}
			if resp.PolicyDocument.Statement[0].Effect != "Deny" {
				t.Fatalf("third REST call: %v, want Deny", resp.PolicyDocument)
			}
			for _, f := range append(dialects.Fields(), headers.RetryAfter) {
				if _, ok := resp.Context[f.Key]; !ok {
					t.Errorf("REST context lacks %q, which the %s gateway response maps", f.Key, f.Name)
				}
			}
			_, hasResetAt := resp.Context[headers.KeyResetAt]
			if hasResetAt != tt.resetAt {
				t.Errorf("REST context has resetAt = %v, want %v (only with legacy)", hasResetAt, tt.resetAt)
			}

			body := `{"subject":"k2","api":"a1b2c3","route":"GET /orders/{id}"}`
			var last events.APIGatewayProxyResponse
			for i := 0; i < 3; i++ {
				var err error
				if last, err = check.Proxy(ctx, events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: body}); err != nil {
					t.Fatal(err)
				}
			}
			after := time.Now()
			if last.StatusCode != 429 {
				t.Fatalf("third check = %d, want 429", last.StatusCode)
			}
			got := map[string]string{}
			for k, v := range last.Headers {
				got[k] = v
			}
			if v := got["Retry-After"]; v != "30" {
				t.Errorf("Retry-After = %q, want 30", v)
			}
			if tt.resetAt {
				reset, err := strconv.ParseInt(got["X-RateLimit-Reset"], 10, 64)
				if lo, hi := before.Add(time.Minute).Unix(), after.Add(time.Minute+time.Second).Unix(); err != nil || reset < lo || reset > hi {
					t.Errorf("X-RateLimit-Reset = %q, want a Unix time in [%d, %d]", got["X-RateLimit-Reset"], lo, hi)
				}
			}
			for _, k := range []string{"Content-Type", "Cache-Control", "Retry-After", "X-RateLimit-Reset"} {
				delete(got, k)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("check 429 fields (-want +got):\n%s", diff)
			}
		})
	}
}
