package ratelimit

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
)

// BenchmarkWrapREST compares, against the real Redis of the tests, one
// REST event answered by Sluice's own authorizer handler (subject from the
// x-api-key header) with the same event answered by a wrapped team
// handler (subject from its principalId, contexts merged), and the team
// handler alone. The default limit is too high ever to deny, so every
// call makes one Redis round trip.
//
//	scripts/testenv.sh go test -run '^$' -bench WrapREST -benchmem ./ratelimit/
func BenchmarkWrapREST(b *testing.B) {
	l, err := New(context.Background(), Options{
		RedisURL: os.Getenv("REDIS_URL"), Prefix: os.Getenv("REDIS_PREFIX"),
		DefaultLimit: "1000000000/1s", Out: io.Discard,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type: "REQUEST", HTTPMethod: "GET", Resource: "/orders/{id}",
		MethodArn:      "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/prod/GET/orders/42",
		Headers:        map[string]string{"x-api-key": "bench-user"},
		RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{APIID: "a1b2c3d4e5"},
	}
	team := func(_ context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
		return events.APIGatewayCustomAuthorizerResponse{
			PrincipalID: "bench-user",
			PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
				{Action: []string{"execute-api:Invoke"}, Effect: "Allow", Resource: []string{ev.MethodArn}}}},
			Context: map[string]any{"tenant": "acme"},
		}, nil
	}
	wrapped := l.WrapREST(team)
	// Sluice's own handler over the same rules and limiter: the Limiter's
	// reads the wrapped handler's answer (SUBJECT_SOURCES=principal).
	own := apigw.NewHandler(authorizer.New(l.dec.Cache, l.dec.Limiter, authorizer.Options{}), apigw.Options{Metrics: l.dec.Metrics})
	ctx := context.Background()
	for _, bm := range []struct {
		name string
		h    RESTHandler
	}{{"sluice", own.REST}, {"wrapped", wrapped}, {"team", team}} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := bm.h(ctx, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
