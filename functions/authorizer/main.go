// Command authorizer is the Sluice Lambda authorizer: API Gateway REST API
// REQUEST authorizer events (and HTTP API payload 2.0 events) in, an IAM
// policy (or a simple response) out. Wiring only: see internal/authorizer.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/authorizer/wiring"
	"github.com/sluicehq/sluice/internal/config"
)

func main() {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "authorizer: configuration: %v\n", err)
		os.Exit(1)
	}
	app, err := wiring.New(context.Background(), cfg, wiring.Options{Out: os.Stdout, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "authorizer: %v\n", err)
		os.Exit(1)
	}
	// Flush the metrics aggregated since the last EMF line when Lambda
	// shuts the environment down (SIGTERM, through a no-op extension).
	lambda.StartWithOptions(app.Authorizer, lambda.WithEnableSIGTERM(app.Metrics.Flush))
}
