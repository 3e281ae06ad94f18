// Command authorizer is the Sluice Lambda authorizer: API Gateway REST API
// REQUEST authorizer events (and HTTP API payload 2.0 events) in, an IAM
// policy (or a simple response) out. Wiring only: the decision is in internal/authorizer, the object
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
		fmt.Fprintf(os.Stderr, "authorizer: configuration: %v\n", err)
		os.Exit(1)
	}
	a, err := app.New(context.Background(), cfg, app.Options{Parts: app.Decide, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "authorizer: %v\n", err)
		os.Exit(1)
	}
	// When Lambda shuts the environment down (SIGTERM, through a no-op
	// extension): give the token leases' unused tokens back to Redis, then
	// flush the metrics aggregated since the last EMF line.
	lambda.StartWithOptions(a.Authorizer, lambda.WithEnableSIGTERM(a.Shutdown))
}
