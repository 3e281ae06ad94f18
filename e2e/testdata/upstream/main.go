// Command upstream is a team's own Lambda REQUEST authorizer, as Sluice
// chains it (UPSTREAM_AUTHORIZER) in the end-to-end test: "Authorization:
// Bearer allow-<tenant>" is allowed as principal user-<tenant> with the
// tenant and a plan in its context; "Bearer deny" gets a Deny policy;
// anything else is Unauthorized. It prints one line per invocation, so the
// test can count them (Sluice caches answers per identity).
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	auth := ev.Headers["Authorization"]
	fmt.Printf("upstream invoked: %s\n", auth)
	policy := func(effect string) events.APIGatewayCustomAuthorizerPolicy {
		return events.APIGatewayCustomAuthorizerPolicy{Version: "2012-10-17", Statement: []events.IAMPolicyStatement{
			{Action: []string{"execute-api:Invoke"}, Effect: effect, Resource: []string{ev.MethodArn}},
		}}
	}
	switch tenant, ok := strings.CutPrefix(auth, "Bearer allow-"); {
	case ok && tenant != "":
		return events.APIGatewayCustomAuthorizerResponse{
			PrincipalID:    "user-" + tenant,
			PolicyDocument: policy("Allow"),
			Context:        map[string]any{"tenant": tenant, "plan": "gold", "seats": 3},
		}, nil
	case auth == "Bearer deny":
		return events.APIGatewayCustomAuthorizerResponse{PrincipalID: "denied", PolicyDocument: policy("Deny"),
			Context: map[string]any{"reason": "suspended"}}, nil
	}
	return events.APIGatewayCustomAuthorizerResponse{}, errors.New("Unauthorized")
}

func main() { lambda.Start(handle) }
