// Command migrate is the Lambda that applies Sluice's PostgreSQL migrations
// (package migrations, embedded in the binary) at deploy time.
//
// It accepts any JSON event, so it works invoked directly
// (`aws lambda invoke`), as a CDK triggers.Trigger, and as the onEvent
// handler of a CloudFormation custom resource behind the CDK Provider
// framework: the framework answers CloudFormation's ResponseURL itself, so
// returning normally reports success and returning an error reports
// failure (the deploy then rolls back). For a custom resource Delete event
// it does nothing: deleting the stack must not depend on the database.
//
// The reply is {"applied": ["00001_rules.sql", ...], "version": N}, plus a
// PhysicalResourceId and Data.Version for custom resources. Running it again
// applies nothing; concurrent runs serialise on an advisory lock.
//
// Configuration: DATABASE_URL or DB_SECRET_ARN (+ DB_HOST, DB_SSLMODE), and
// LOG_LEVEL; see internal/config. Outside Lambda (no AWS_LAMBDA_RUNTIME_API,
// or with -local) it migrates DATABASE_URL once and exits:
//
//	DATABASE_URL=postgres://localhost/sluice go run ./functions/migrate -local
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/store/postgres"
)

// physicalID names the one custom resource this function backs.
const physicalID = "sluice-migrations"

// event is the part of an invocation the function looks at; every other
// field, and any other event, is ignored.
type event struct {
	// RequestType is Create, Update or Delete for CloudFormation custom
	// resource events, empty otherwise.
	RequestType string `json:"RequestType"`
}

// response is the reply. PhysicalResourceId and Data are read by the CDK
// Provider framework and ignored by everyone else.
type response struct {
	Applied            []string          `json:"applied"`
	Version            int64             `json:"version"`
	Skipped            string            `json:"skipped,omitempty"`
	PhysicalResourceID string            `json:"PhysicalResourceId,omitempty"`
	Data               map[string]string `json:"Data,omitempty"`
}

type migrator struct {
	db  *sql.DB
	log *slog.Logger
}

func (m *migrator) handle(ctx context.Context, raw json.RawMessage) (response, error) {
	log := m.log
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("requestId", lc.AwsRequestID)
	}
	var ev event
	_ = json.Unmarshal(raw, &ev) // not an object: a direct invocation
	if ev.RequestType != "" {
		log = log.With("requestType", ev.RequestType)
	}
	if ev.RequestType == "Delete" {
		log.InfoContext(ctx, "custom resource delete: nothing to do")
		return response{Applied: []string{}, Skipped: "delete", PhysicalResourceID: physicalID}, nil
	}

	start := time.Now()
	res, err := postgres.Migrate(ctx, m.db)
	if err != nil {
		log.ErrorContext(ctx, "migrate failed", "applied", res.Applied, "error", err)
		return response{}, fmt.Errorf("migrate: %w", err)
	}
	log.InfoContext(ctx, "migrated", "applied", res.Applied, "version", res.Version,
		"durationMs", time.Since(start).Milliseconds())
	out := response{Applied: res.Applied, Version: res.Version}
	if ev.RequestType != "" {
		out.PhysicalResourceID = physicalID
		out.Data = map[string]string{"Version": strconv.FormatInt(res.Version, 10)}
	}
	return out, nil
}

func main() {
	local := flag.Bool("local", false, "migrate DATABASE_URL once and exit instead of serving Lambda invocations")
	flag.Parse()

	cfg, err := config.FromEnv(os.Getenv)
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: cfg.LogLevel}))
	if err != nil {
		log.Error("bad configuration", "error", err)
		os.Exit(1)
	}
	ctx := context.Background()
	pool, err := config.Postgres(ctx, cfg)
	if err != nil {
		log.Error("postgres", "error", err)
		os.Exit(1)
	}
	m := &migrator{db: stdlib.OpenDBFromPool(pool), log: log}

	if *local || os.Getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		res, err := m.handle(ctx, json.RawMessage(`{}`))
		cancel()
		m.db.Close()
		pool.Close()
		if err != nil {
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	lambda.Start(m.handle)
}
