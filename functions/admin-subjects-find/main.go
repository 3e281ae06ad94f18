// Command admin-subjects-find is the Lambda function behind
// POST /subjects/find of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

func main() {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "admin-subjects-find: configuration: %v\n", err)
		os.Exit(1)
	}
	a, err := app.New(context.Background(), cfg, app.Options{Parts: app.Administer, Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")})
	if err != nil {
		fmt.Fprintf(os.Stderr, "admin-subjects-find: %v\n", err)
		os.Exit(1)
	}
	lambda.Start(a.AdminHandler(admin.RouteFindSubject))
}
