// Package adminmain is every admin route's Lambda main: the configuration
// from the environment, the object graph of one app part, and the Lambda
// runtime on the route's handler. Each functions/admin-*/main.go is one
// call of Run, naming its part (what infra's TestAccessMatchesMains reads)
// and its route.
package adminmain

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

// Reader builds the stats reader of a route that reads Contributor
// Insights, from the deployment's rule prefix. Only the mains of those
// routes pass one (insights.Load), so that no other function links the
// CloudWatch SDK.
type Reader func(ctx context.Context, prefix string) (admin.StatsReader, error)

// Run is the main of the Lambda function name serving route with part
// built; reader is nil but for the routes that read Contributor Insights.
// A configuration or build failure exits 1 with a line naming the
// function, which the Lambda console shows as the init error.
func Run(name string, part app.Parts, route string, reader Reader) {
	ctx := context.Background()
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fail(name, fmt.Errorf("configuration: %w", err))
	}
	o := app.Options{Parts: part, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	if reader != nil && cfg.InsightsRulePrefix != "" {
		if o.StatsReader, err = reader(ctx, cfg.InsightsRulePrefix); err != nil {
			fail(name, err)
		}
	}
	a, err := app.New(ctx, cfg, o)
	if err != nil {
		fail(name, err)
	}
	lambda.Start(a.AdminHandler(route))
}

func fail(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}
