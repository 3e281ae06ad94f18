// Command admin-stats is the Lambda function behind
// GET /stats of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
// It alone reads CloudWatch (Contributor Insights): the reader is built
// here so that no other function links the CloudWatch SDK.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/stats/insights"
)

func main() {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "admin-stats: configuration: %v\n", err)
		os.Exit(1)
	}
	o := app.Options{Parts: app.Stats, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	if cfg.InsightsRulePrefix != "" {
		r, err := insights.Load(context.Background(), cfg.InsightsRulePrefix)
		if err != nil {
			fmt.Fprintf(os.Stderr, "admin-stats: %v\n", err)
			os.Exit(1)
		}
		o.StatsReader = r
	}
	a, err := app.New(context.Background(), cfg, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "admin-stats: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(a.AdminHandler(admin.RouteStats))
}
