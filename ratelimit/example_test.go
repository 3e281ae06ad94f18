package ratelimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/ratelimit"
)

// authorize is a team's own REST API authorizer: it checks the caller's
// token and names the user (principalId) and its tenant (context).
func authorize(ctx context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	user, ok := strings.CutPrefix(ev.Headers["Authorization"], "Bearer token-of-")
	if !ok {
		return events.APIGatewayCustomAuthorizerResponse{}, errors.New("Unauthorized") // 401
	}
	return events.APIGatewayCustomAuthorizerResponse{
		PrincipalID: user,
		PolicyDocument: events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: "Allow", Resource: []string{ev.MethodArn}},
		}},
		Context: map[string]any{"tenant": "acme"},
	}, nil
}

// A Lambda authorizer's main: the team's handler, wrapped. FromEnv reads
// the settings Sluice's authorizer reads (REDIS_URL, DATABASE_URL or
// DB_SECRET_ARN, SUBJECT_SOURCES=principal or context:<key>, …).
func Example() {
	rl, err := ratelimit.FromEnv(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	lambda.StartWithOptions(rl.WrapREST(authorize), lambda.WithEnableSIGTERM(rl.Close))
}

// The wrapped handler, called as API Gateway calls it, against a real
// Redis: with a default limit of 2 a minute, the third request of a user
// is denied, with the seconds to wait; a caller the team's handler refuses
// never reaches Sluice.
func ExampleLimiter_WrapREST() {
	rl, err := ratelimit.New(context.Background(), ratelimit.Options{
		RedisURL:     os.Getenv("REDIS_URL"),
		Prefix:       os.Getenv("REDIS_PREFIX"),
		DefaultLimit: "2/1m",
		Out:          io.Discard, // the example keeps its log lines to itself
	})
	if err != nil {
		log.Fatal(err)
	}
	defer rl.Close()
	handler := rl.WrapREST(authorize)

	var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
	_ = json.Unmarshal([]byte(`{"type": "REQUEST", "httpMethod": "GET", "resource": "/orders",
		"methodArn": "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3d4e5/prod/GET/orders",
		"headers": {"Authorization": "Bearer token-of-ada"}, "requestContext": {"apiId": "a1b2c3d4e5"}}`), &ev)
	for range 3 {
		resp, err := handler(context.Background(), ev)
		fmt.Println(resp.PrincipalID, resp.PolicyDocument.Statement[0].Effect, "remaining", resp.Context["remaining"],
			"retryAfter", resp.Context["retryAfter"], "tenant", resp.Context["tenant"], err)
	}
	ev.Headers["Authorization"] = "Bearer forged"
	_, err = handler(context.Background(), ev)
	fmt.Println(err)
	// Output:
	// ada Allow remaining 1 retryAfter 0 tenant acme <nil>
	// ada Allow remaining 0 retryAfter 0 tenant acme <nil>
	// ada Deny remaining 0 retryAfter 30 tenant acme <nil>
	// Unauthorized
}
