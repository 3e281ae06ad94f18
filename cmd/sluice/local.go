package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/local"
)

// localCmd's flags that stand for a variable the Lambdas read take it as
// their default (kong's env tag), then local.Defaults; a flag given wins.
type localCmd struct {
	Addr             string  `default:"127.0.0.1:8080" help:"Listen address (port 0: any)."`
	API              string  `name:"api" default:"demo" help:"API id of the demo API."`
	Stage            string  `default:"local" help:"Stage name in the method ARN."`
	Seed             *string `placeholder:"FILE" help:"Rules and plans to create at start (default ${default_seed}; \"\": none)."`
	RedisPrefix      string  `envvar:"REDIS_PREFIX" default:"${redis_prefix}" help:"Prefix of every Redis key."`
	RedisTimeout     string  `envvar:"REDIS_TIMEOUT" default:"${redis_timeout}" help:"Budget per Redis call."`
	Poll             string  `envvar:"RULES_VERSION_POLL" default:"${poll}" help:"How often the rules version is checked."`
	Refresh          string  `envvar:"RULES_REFRESH" help:"Full reload interval (default 5m)."`
	SubjectSources   string  `envvar:"SUBJECT_SOURCES" default:"${subject_sources}" help:"Where the subject comes from, in order (none: 401)."`
	RatelimitHeaders string  `name:"ratelimit-headers" envvar:"RATELIMIT_HEADERS" help:"Rate-limit header dialects: ${header_names} (default draft11)."`
	DefaultLimit     string  `envvar:"DEFAULT_LIMIT" help:"Limit when no rule matches (100/1m,burst=200); unset: allow."`
	Regions          int     `default:"1" help:"Regions to run (1 to ${max_regions}): ports from --addr up, one Redis each, one ledger."`
	LedgerURL        string  `name:"ledger-url" placeholder:"URL" help:"The Regions' ledger (DynamoDB endpoint; default: start dynalite)."`
	SubjectKeyFrom   string  `name:"subject-key-from" placeholder:"ID" help:"Record this run's subject hash key in place of key id ID (docs/SECURITY.md#subject-hash-key)."`
	Edge             bool    `help:"Deny long-blocked subjects at a local CDN edge before the demo API (docs/edge.md)."`
}

func (cmd *localCmd) Help() string {
	return `Runs the local stack: the demo API behind the real authorizer code path on
--addr, an HTTP API (/httpapi/, a Lambda integration behind
ratelimit.LimitHTTPAPI) and a net/http service (/service/, behind
ratelimit's middleware) with Prometheus metrics on /metrics, the admin API
and the check API under /admin/ (bearer token), Redis and the rules store,
built by the same code as the Lambdas. REDIS_URL and
DATABASE_URL select real servers (the database is migrated on start; when it
is down, sluice starts anyway, as a cold Lambda does, on the rules snapshot
in Redis or the default limit, and migrates once it answers); without them
an in-process Redis (miniredis) and the in-memory store are used. Ctrl-C
stops.

Environment: every variable the Lambdas read (REDIS_URL, DATABASE_URL,
SUBJECT_SOURCES, DEFAULT_LIMIT, REDIS_TIMEOUT, LOG_LEVEL, ...; the table
is docs/config.md), SLUICE_ADMIN_TOKEN (else one is generated and printed), and
SLUICE_STATE_DIR (default <user config dir>/sluice), where the subject hash
key and the development JWT issuer's key are generated once and kept. A flag
wins over its variable.

--regions N runs N local Regions over one ledger (docs/local.md): each
Region's gateway, admin API and console on its own port, all sharing the
rules (a write through any Region reaches every one) and the subject hash
key; the global rule for the API key demo-global holds 10 a day across
them. The ledger is --ledger-url, else dynalite started from
SLUICE_DYNALITE (its cli.js) or .cache/dynalite, on node; LEDGER_TABLE
names its table (default sluice-local-ledger).`
}

// localVars are the defaults the local command's help and flags show.
func localVars() map[string]string {
	return map[string]string{
		"default_seed":    local.DefaultSeed,
		"redis_prefix":    local.Defaults["REDIS_PREFIX"],
		"redis_timeout":   local.Defaults["REDIS_TIMEOUT"],
		"poll":            local.Defaults["RULES_VERSION_POLL"],
		"subject_sources": local.Defaults["SUBJECT_SOURCES"],
		"header_names":    headers.Names,
		"max_regions":     strconv.Itoa(local.MaxRegions),
	}
}

func (cmd *localCmd) Run(e *env) error {
	flags := map[string]string{
		"REDIS_PREFIX": cmd.RedisPrefix, "REDIS_TIMEOUT": cmd.RedisTimeout, "RULES_VERSION_POLL": cmd.Poll,
		"RULES_REFRESH": cmd.Refresh, "SUBJECT_SOURCES": cmd.SubjectSources, "RATELIMIT_HEADERS": cmd.RatelimitHeaders,
		"DEFAULT_LIMIT": cmd.DefaultLimit,
	}
	if cmd.Regions < 1 || cmd.Regions > local.MaxRegions {
		return &usageError{fmt.Sprintf("--regions %d: run 1 to %d Regions", cmd.Regions, local.MaxRegions)}
	}
	if cmd.LedgerURL != "" && cmd.Regions == 1 {
		return &usageError{"--ledger-url is the ledger of --regions 2 or more: one Region has no global budget to share"}
	}
	c := local.Config{
		Addr: cmd.Addr, API: cmd.API, Stage: cmd.Stage, Seed: local.DefaultSeed,
		Regions: cmd.Regions, LedgerURL: cmd.LedgerURL, Dynalite: e.env("SLUICE_DYNALITE"), SubjectKeyFrom: cmd.SubjectKeyFrom,
		Edge:      cmd.Edge,
		Token:     e.env("SLUICE_ADMIN_TOKEN"),
		ReadToken: e.env("SLUICE_READ_TOKEN"),
		StateDir:  e.env("SLUICE_STATE_DIR"),
		Getenv: func(k string) string {
			if v, ok := flags[k]; ok {
				return v
			}
			return e.env(k)
		},
	}
	if cmd.Seed != nil {
		c.Seed, c.SeedSet = *cmd.Seed, true
	}
	err := local.Run(e.ctx, c, e.stdout, e.stderr)
	if errors.Is(err, local.ErrConfig) {
		return &usageError{err.Error()}
	}
	return err
}
