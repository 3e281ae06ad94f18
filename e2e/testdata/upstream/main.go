// Command upstream is a team's own Lambda REQUEST authorizer, as Sluice
// chains it (UPSTREAM_AUTHORIZER) in the end-to-end test: "Authorization:
// Bearer allow-<tenant>" is allowed as principal user-<tenant> with the
// tenant and a plan in its context and a usage plan key; "Bearer deny"
// gets a Deny policy; anything else is Unauthorized. Its policies are
// written as AWS's own authorizer examples write them, Action and Resource
// as plain strings. It prints one line per invocation, so the test can
// count them (Sluice caches answers per identity).
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func handle(_ context.Context, ev events.APIGatewayCustomAuthorizerRequestTypeRequest) (map[string]any, error) {
	auth := ev.Headers["Authorization"]
	fmt.Printf("upstream invoked: %s\n", auth)
	policy := func(effect string) map[string]any {
		return map[string]any{"Version": "2012-10-17", "Statement": []map[string]any{
			{"Action": "execute-api:Invoke", "Effect": effect, "Resource": ev.MethodArn},
		}}
	}
	switch tenant, ok := strings.CutPrefix(auth, "Bearer allow-"); {
	case ok && tenant != "":
		return map[string]any{
			"principalId":        "user-" + tenant,
			"policyDocument":     policy("Allow"),
			"context":            map[string]any{"tenant": tenant, "plan": "gold", "seats": 3},
			"usageIdentifierKey": "plan-key-" + tenant,
		}, nil
	case auth == "Bearer deny":
		return map[string]any{"principalId": "denied", "policyDocument": policy("Deny"),
			"context": map[string]any{"reason": "suspended"}}, nil
	}
	return nil, errors.New("Unauthorized")
}

func main() { lambda.Start(handle) }
