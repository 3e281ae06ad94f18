package admin_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
)

// BenchmarkHandler measures the admin handler alone, as a Lambda runs it:
// an API Gateway proxy event in, a proxy response out, over the in-memory
// store, so that the figures are the event decoding, the routing and the
// encoding rather than PostgreSQL's round trips.
func BenchmarkHandler(b *testing.B) {
	svc := admin.New(mustMemory(), nil, nil, admin.Options{})
	h := benchHandler(svc)
	ctx := context.Background()
	create, err := h(ctx, event(admin.RouteCreateRule, nil, ruleBody))
	if err != nil || create.StatusCode != 201 {
		b.Fatalf("create = %d %s, %v", create.StatusCode, create.Body, err)
	}
	id := create.Headers["Location"][len("/rules/"):]
	for _, c := range []struct {
		name   string
		ev     events.APIGatewayProxyRequest
		status int
	}{
		{"get", event(admin.RouteGetRule, idParam(id), ""), 200},
		{"list", withQuery(event(admin.RouteListRules, nil, ""), "api", "a1b2c3d4e5"), 200},
		{"limits-no-limiter", event(admin.RouteSubjectLimits, map[string]string{"subject": "key-1"}, ""), 503},
		{"not-found", event("GET /nope/{id}", idParam("x"), ""), 404},
		{"method-not-allowed", event("PATCH /rules/{id}", idParam(id), ""), 405},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := h(ctx, c.ev)
				if err != nil || resp.StatusCode != c.status {
					b.Fatalf("%s %s = %d %s, %v; want %d", c.ev.HTTPMethod, c.ev.Path, resp.StatusCode, resp.Body, err, c.status)
				}
			}
		})
	}
}
