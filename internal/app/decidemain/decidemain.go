// Package decidemain is the Lambda main of the functions that decide (the
// authorizer and check), written once: the configuration from the
// environment, the Decider (internal/app.NewDecider), and the Lambda
// runtime on the handler the function serves, with the decision path's
// shutdown on SIGTERM.
package decidemain

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

// Run is the main of the Lambda function name, serving the handler pick
// chooses of its Decider (its Authorizer or its Check). A configuration or
// build failure exits 1 with a line naming the function, which the Lambda
// console shows as the init error.
func Run(name string, pick func(*app.Decider) lambda.Handler) {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fail(name, fmt.Errorf("configuration: %w", err))
	}
	d, err := app.NewDecider(context.Background(), cfg, app.Options{Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	if err != nil {
		fail(name, err)
	}
	// When Lambda shuts the environment down (SIGTERM, through a no-op
	// extension): give the token leases' unused tokens back to Redis, then
	// flush the metrics aggregated since the last EMF line.
	lambda.StartWithOptions(pick(d), lambda.WithEnableSIGTERM(d.Shutdown))
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}
