// Command check is the Sluice check API for services not behind API
// Gateway: POST /check {subject, api, route, cost} through an API Gateway
// proxy integration or a Function URL, answered by the same decision code
// as the authorizer. Wiring only: the decision is in internal/authorizer, the object
// graph is built by internal/app.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

func main() {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "check: configuration: %v\n", err)
		os.Exit(1)
	}
	a, err := app.New(context.Background(), cfg, app.Options{Parts: app.Decide, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "check: %v\n", err)
		os.Exit(1)
	}
	// When Lambda shuts the environment down (SIGTERM, through a no-op
	// extension): give the token leases' unused tokens back to Redis, then
	// flush the metrics aggregated since the last EMF line.
	lambda.StartWithOptions(a.Check, lambda.WithEnableSIGTERM(a.Shutdown))
}
