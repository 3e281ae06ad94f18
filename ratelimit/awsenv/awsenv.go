// Package awsenv builds a ratelimit.Limiter from the environment Sluice's
// authorizer Lambda reads: REDIS_URL with REDIS_MODE and the AUTH token in
// Secrets Manager (REDIS_AUTH_SECRET_ARN), the subject hash key in Secrets
// Manager (SUBJECT_HMAC_KEY_SECRET_ARN), and the PostgreSQL rules database
// (DATABASE_URL or DB_SECRET_ARN) read when the Redis snapshot is missing.
//
// It links the AWS SDK and pgx to do so, which package ratelimit does not:
// import it in a Lambda that runs beside a Sluice deployment; a service
// that has its Redis URL and key at hand needs only ratelimit.New.
//
//	rl, err := awsenv.FromEnv(ctx)
//	if err != nil { … }
//	lambda.Start(rl.WrapREST(myAuthorizer))
package awsenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/decider"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/ratelimit"
)

// FromEnv builds a Limiter from the environment variables Sluice's
// authorizer Lambda reads (REDIS_URL, REDIS_MODE, REDIS_AUTH_SECRET_ARN,
// DATABASE_URL or DB_SECRET_ARN, SUBJECT_HMAC_KEY or
// SUBJECT_HMAC_KEY_SECRET_ARN, DEFAULT_LIMIT, RATELIMIT_HEADERS,
// REDIS_PREFIX, REDIS_TIMEOUT, LOG_LEVEL, …), with the Lambda's defaults.
// SUBJECT_SOURCES is either whom the authorizer wrappers limit,
// "principal" (the default: the handler's principalId) or "context:<key>",
// or the sources of the middleware and integration wrappers (header:<name>,
// query:<name>, apikey, ip, jwt:<claim>). Every problem is reported at
// once. The subject hash key is checked as ratelimit.New checks it.
func FromEnv(ctx context.Context) (*ratelimit.Limiter, error) {
	return fromEnv(ctx, os.Getenv)
}

func fromEnv(ctx context.Context, getenv func(string) string) (*ratelimit.Limiter, error) {
	// Principal or context:<key> (or nothing) is whom the authorizer
	// wrappers limit, and leaves the middleware its default; any other
	// valid list without those is the middleware's sources.
	sources := strings.TrimSpace(getenv("SUBJECT_SOURCES"))
	key, ok, _ := identity.ParseUpstreamSubject(sources)
	var kerr error
	if ok || sources == "" {
		sources = ""
	} else if src, err := identity.ParseSources(sources); err != nil || identity.HasKind(src, identity.SourcePrincipal) || identity.HasKind(src, identity.SourceContext) {
		kerr = fmt.Errorf("SUBJECT_SOURCES: %q: want principal or context:<key> (whom a wrapped authorizer names; a key of 1 to 128 printable ASCII characters, no space, comma or semicolon), "+
			"or header:<name>, query:<name>, apikey, ip and jwt:<claim> sources (the middleware's), not both", sources)
	}
	cfg, err := config.FromEnv(func(k string) string {
		if k == "SUBJECT_SOURCES" {
			return sources
		}
		return getenv(k)
	})
	if err := errors.Join(kerr, err); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	fn := cmp.Or(getenv("AWS_LAMBDA_FUNCTION_NAME"), "ratelimit")
	a, err := app.NewDecider(ctx, cfg, app.Options{Function: fn})
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	l := ratelimit.FromDecider(a.Decider, decider.EmbedOptions{ContextKey: key, Headers: cfg.RateLimitHeaders, Close: a.Close})
	if err := l.CheckKey(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return l, nil
}

// NewLedger returns the ledger of global rules' budgets on the DynamoDB
// table (the deployment's LEDGER_TABLE), in the Region of the default AWS
// configuration, for ratelimit.Options.Ledger. The table is a global table
// with multi-Region strong consistency in every Region that shares it
// (docs/global.md); the caller's role needs dynamodb:UpdateItem and
// GetItem on it.
func NewLedger(ctx context.Context, table string) (ratelimit.Ledger, error) {
	cfg := config.Config{LedgerTable: table, LedgerTimeout: 200 * time.Millisecond}
	l, err := app.NewLedger(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	if l == nil {
		return nil, errors.New("ratelimit: a ledger needs a table name")
	}
	return l, nil
}
