// Command httpapi is the Lambda integration of an HTTP API route behind
// Sluice's limits: docs/quickstart.md's "HTTP API" section, byte for byte
// (its test keeps the two the same).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/awsenv"
)

// orders is your integration handler as it is today.
func orders(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"order":"` + ev.PathParameters["id"] + `"}`,
		Headers: map[string]string{"Content-Type": "application/json"}}, nil
}

func main() {
	rl, err := awsenv.FromEnv(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	// Over the limit: 429, Retry-After, RateLimit fields, and orders is not called.
	h := rl.LimitHTTPAPI(orders, ratelimit.HandlerOptions{AllowHeaders: true})
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(rl.Close))
}
