// Command edge-publisher is the CDN edge's publisher (docs/edge.md), run
// once a minute by a schedule: it drains the long denials the authorizer
// recorded in Redis into the CloudFront KeyValueStore EDGE_STORE_ARN
// names, and sweeps expired entries, in rounds until just before its
// deadline. Wiring only: the publisher is internal/cdn's, the object
// graph internal/app's.
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
		fail(fmt.Errorf("configuration: %w", err))
	}
	p, err := app.NewEdgePublisher(context.Background(), cfg, app.Options{Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}, app.EdgeOptions{})
	if err != nil {
		fail(err)
	}
	lambda.Start(p.Handle)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "edge-publisher: %v\n", err)
	os.Exit(1)
}
