// Command admin-subjects-find is the Lambda function behind
// POST /subjects/find of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
// It hashes the subject with the subject hash key and looks for it in
// the top denied subjects, which on AWS come from CloudWatch Contributor
// Insights, as for admin-stats: the reader is built here so that no other
// function links the CloudWatch SDK. No Redis, no database.
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
		fmt.Fprintf(os.Stderr, "admin-subjects-find: configuration: %v\n", err)
		os.Exit(1)
	}
	o := app.Options{Parts: app.Stats, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	if cfg.InsightsRulePrefix != "" {
		r, err := insights.Load(context.Background(), cfg.InsightsRulePrefix)
		if err != nil {
			fmt.Fprintf(os.Stderr, "admin-subjects-find: %v\n", err)
			os.Exit(1)
		}
		o.StatsReader = r
	}
	a, err := app.New(context.Background(), cfg, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "admin-subjects-find: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(a.AdminHandler(admin.RouteFindSubject))
}
