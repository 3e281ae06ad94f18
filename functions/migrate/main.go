// Command migrate is the Lambda that applies Sluice's migrations at deploy time
// (app.Migrator); outside Lambda, or with -local, it migrates DATABASE_URL once.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

func main() {
	local := flag.Bool("local", false, "migrate DATABASE_URL once and exit instead of serving Lambda invocations")
	keyFrom := flag.String("subject-key-from", "", "with -local: rotate the subject-key record from this key id to SUBJECT_HMAC_KEY's (docs/SECURITY.md#subject-hash-key)")
	flag.Parse()
	cfg, err := config.FromEnv(os.Getenv)
	exitOn(err)
	o := app.Options{Function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	a, err := app.NewMigrator(context.Background(), cfg, o)
	exitOn(err)
	// After each migration, the rules snapshot goes to Redis (REDIS_URL):
	// a fresh stack's authorizers then never read the database.
	exitOn(a.PublishSnapshot(context.Background(), cfg, o))
	if !*local && os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		lambda.Start(a.Migrator.Handle)
	}
	exitOn(a.Migrator.Once(context.Background(), os.Stdout, *keyFrom))
}

func exitOn(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "migrate: %v\n", err)
		os.Exit(1)
	}
}
