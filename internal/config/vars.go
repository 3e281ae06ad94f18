package config

import (
	"cmp"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/envvar"
)

// Var is one environment variable Sluice reads. FromEnv reads only the
// variables of Vars and takes their defaults from it (the parsers and
// ranges ratelimit.FromEnv shares are in internal/envvar); docs/config.md's
// table is rendered from it (Markdown), and a test fails when they differ.
type Var struct {
	// Name is the variable, such as "REDIS_URL".
	Name string
	// Default is the value FromEnv uses when the variable is unset or
	// empty, in the variable's own syntax; "" when unset has a meaning of
	// its own, which DefaultDoc then says.
	Default string
	// DefaultDoc, when set, is what the tables show as the default
	// instead of Default (markdown), for a default that is not a value.
	DefaultDoc string
	// Doc is the full meaning (markdown, one paragraph, links relative to
	// docs/).
	Doc string
	// Functions are the Lambda functions whose behaviour the variable
	// changes ("admin" is every admin-* route but admin-stats). sluice
	// local and the ratelimit package read every variable.
	Functions []string
}

// Who reads what, for Var.Functions.
var (
	decide     = []string{"authorizer", "check"}
	decideAdm  = []string{"authorizer", "check", "admin"}
	everything = []string{"authorizer", "check", "admin", "admin-stats", "migrate"}
	withStore  = []string{"authorizer", "check", "admin", "migrate"}
	writers    = []string{"admin-write", "migrate"}
)

// Vars is every environment variable FromEnv reads, in the order the
// tables list them.
var Vars = []Var{
	{Name: "REDIS_URL", DefaultDoc: "—", Functions: decideAdm,
		Doc: "`redis://[user:password@]host:port[/db]`, or `rediss://` for TLS; in `cluster` mode `?addr=HOST:PORT` adds seed nodes " +
			"([sentinel](deploy.md#redis-sentinel))"},
	{Name: "REDIS_MODE", Default: "single", Functions: decideAdm,
		Doc: "`cluster` for Redis Cluster, ElastiCache cluster mode or Serverless; `sentinel` for a primary and replicas under Redis Sentinel"},
	{Name: "REDIS_AUTH_SECRET_ARN", DefaultDoc: "—", Functions: decideAdm,
		Doc: "a secret holding the Redis AUTH token (bare, or JSON `password` and optionally `username`); overrides a password in `REDIS_URL`"},
	{Name: envvar.RedisTimeout.Name, Default: "25ms", Functions: decideAdm,
		Doc: "the limiter's budget per Redis call, at most `10s`; past it, each rule's failure mode decides"},
	{Name: envvar.RedisPoolSize.Name, Default: "4", Functions: decideAdm,
		Doc: "connections per Redis node, 1 to 1024"},
	{Name: "REDIS_PREFIX", DefaultDoc: "`sl:`", Functions: decideAdm,
		Doc: "the start of every Redis key, one per deployment sharing a Redis; at most 64 printable ASCII characters, no space, `{` or `}`"},
	{Name: "DATABASE_URL", DefaultDoc: "—", Functions: withStore,
		Doc: "the rules database as a PostgreSQL URL or keyword/value string; without an `sslmode`, `verify-full` as `DB_SSLMODE` " +
			"(`sluice local`: `disable` on this machine); not with `DB_SECRET_ARN`"},
	{Name: "DB_SECRET_ARN", DefaultDoc: "—", Functions: withStore,
		Doc: "the rules database as an RDS-format secret (JSON `username`, `password`, `host`, `port`, `dbname`)"},
	{Name: "DB_HOST", DefaultDoc: "the secret's", Functions: withStore,
		Doc: "replaces the secret's host, such as with an RDS Proxy endpoint; only with `DB_SECRET_ARN`"},
	{Name: "DB_READER_SECRET_ARN", DefaultDoc: "—", Functions: []string{"migrate"},
		Doc: "the `username` and `password` migrate gives the read-only role `sluice_reader`, " +
			"which the read-only functions log in as ([deploy](deploy.md#admin-functions))"},
	{Name: "DB_SSLMODE", Default: "verify-full", Functions: withStore,
		Doc: "libpq `sslmode` with `DB_SECRET_ARN`: `verify-full` or `require` ([TLS](store.md#tls-to-postgresql))"},
	{Name: "DB_SSLROOTCERT", DefaultDoc: "built in", Functions: withStore,
		Doc: "a PEM file of CA certificates to trust instead, such as a newer RDS bundle; only with `DB_SECRET_ARN`"},
	{Name: "MAX_RULES", DefaultDoc: "`10000`", Functions: []string{"admin"},
		Doc: "the most rules stored, up to 1000000; a create beyond is a 409"},
	{Name: "SUBJECT_SOURCES", Default: "header:x-api-key", Functions: decide,
		Doc: "where the subject is read, in order: `header:NAME`, `query:NAME`, `apikey`, `ip`, " +
			"`jwt:CLAIM`, `principal`, `context:KEY` ([subject](authorizer.md#subject))"},
	{Name: "SUBJECT_SHOW", DefaultDoc: "—", Functions: decide,
		Doc: "sources whose subjects the decision line and top offenders show as sent, beside the hash: a comma list of `jwt`, `context`, " +
			"`principal`, `ip` ([security](SECURITY.md#subjects-shown-as-sent))"},
	{Name: "DIMENSIONS", DefaultDoc: "—", Functions: decide,
		Doc: "more subjects limited per request, `name=sources;...` such as `ip=ip` ([dimensions](authorizer.md#several-dimensions-per-request))"},
	{Name: "UPSTREAM_AUTHORIZER", DefaultDoc: "—", Functions: decide,
		Doc: "name or ARN of an authorizer Lambda [invoked first](authorizer.md#chaining-an-existing-authorizer); " +
			"the `principal` and `context:KEY` sources require it"},
	{Name: "UPSTREAM_IDENTITY_SOURCES", DefaultDoc: "—", Functions: decide,
		Doc: "every value the upstream reads (`header:NAME`, `query:NAME`, `apikey`, `ip`, `route`, `stagevar:NAME`): " +
			"its answers are cached per those, and only when named"},
	{Name: "UPSTREAM_CACHE_TTL", DefaultDoc: "`300s` with the sources, else `0`", Functions: decide,
		Doc: "how long an upstream answer is reused, `0s` (off) to `1h`; above 0 needs `UPSTREAM_IDENTITY_SOURCES`"},
	{Name: "JWT_ISSUER", DefaultDoc: "—", Functions: decide,
		Doc: "the `iss` the `jwt:` sources require, such as `https://cognito-idp.<region>.amazonaws.com/<pool id>`"},
	{Name: "JWT_AUDIENCE", DefaultDoc: "—", Functions: decide,
		Doc: "a comma list holding a token's `aud` (Cognito access token: `client_id`); required by the `jwt:` sources"},
	{Name: "JWT_TOKEN_USE", DefaultDoc: "—", Functions: decide,
		Doc: "when set, the `token_use` a token must carry (Cognito: `id` or `access`)"},
	{Name: "JWT_JWKS_URL", DefaultDoc: "`<issuer>/.well-known/jwks.json`", Functions: decide,
		Doc: "where the issuer's signing keys are"},
	{Name: "SUBJECT_HMAC_KEY_SECRET_ARN", DefaultDoc: "—", Functions: decideAdm,
		Doc: "a secret holding the deployment's subject-hash key; not with `SUBJECT_HMAC_KEY`; " +
			"neither: the unkeyed hash, with a warning"},
	{Name: "SUBJECT_HMAC_KEY", DefaultDoc: "—", Functions: decideAdm,
		Doc: "the subject-hash key itself, at least 16 bytes, for development (`sluice local` generates and keeps one)"},
	{Name: "EDGE_KEY_SECRET_ARN", DefaultDoc: "—", Functions: decideAdm,
		Doc: "a secret holding the [CDN edge](edge.md)'s subject key: long denials go to the edge, a reset deletes them there; not with `EDGE_KEY`; neither: no edge"},
	{Name: "EDGE_KEY", DefaultDoc: "—", Functions: decideAdm,
		Doc: "that key itself, at least 16 bytes, for development (`sluice local --edge` generates one)"},
	{Name: "EDGE_STORE_ARN", DefaultDoc: "—", Functions: []string{"edge-publisher"},
		Doc: "the CloudFront KeyValueStore the [edge](edge.md)'s publisher writes"},
	{Name: "ORIGIN_VERIFY_SECRET_ARN", DefaultDoc: "—", Functions: []string{"authorizer"},
		Doc: "a secret holding the value the [edge](edge.md)'s distribution sends in `X-Origin-Verify`: a request without exactly that value is 401 before any decision; not with `ORIGIN_VERIFY`; neither: no check"},
	{Name: "ORIGIN_VERIFY", DefaultDoc: "—", Functions: []string{"authorizer"},
		Doc: "that value itself, 16 to 128 visible ASCII characters without a comma, for development"},
	{Name: "RULES_PUBLIC_KEY", DefaultDoc: "—", Functions: decide,
		Doc: "the rule writers' Ed25519 public key, 32 bytes in base64: other snapshots are refused " +
			"([security](SECURITY.md#rules-in-redis)); unset: read unverified, with a warning"},
	{Name: "RULES_SIGNING_KEY_SECRET_ARN", DefaultDoc: "—", Functions: writers,
		Doc: "a secret of at least 32 bytes the rules snapshot's signing key is derived from; not with `RULES_SIGNING_KEY`; neither: unsigned"},
	{Name: "RULES_SIGNING_KEY", DefaultDoc: "—", Functions: writers,
		Doc: "that secret itself, for development (`sluice local` generates one)"},
	{Name: "DEFAULT_LIMIT", DefaultDoc: "allow", Functions: decideAdm,
		Doc: "the limit when no rule matches, such as `100/1m` or `100/1m,burst=200`; unset allows such requests"},
	{Name: "RATELIMIT_HEADERS", Default: "draft11", Functions: decide,
		Doc: "the rate-limit fields of a 429 and the check API, a comma list of `draft11`, `draft6`, `legacy` " +
			"([dialects](authorizer.md#header-dialects)); `Retry-After` always"},
	{Name: "RULES_VERSION_POLL", Default: "1s", Functions: decide,
		Doc: "the oldest rules version check a decision may rest on, `10ms` to `1h`: a request past it waits for one GET of the version"},
	{Name: "RULES_REFRESH", Default: "5m", Functions: decide,
		Doc: "the backstop: a full reload whatever the version, `1s` to `24h`"},
	{Name: envvar.LeaseMax.Name, Default: "64", Functions: decide,
		Doc: "the most requests one token lease admits without a Redis call, up to 10000; `1` turns leases off ([leases](authorizer.md#token-leases))"},
	{Name: "LEASE_TTL", Default: "250ms", Functions: decide,
		Doc: "how long an unrefilled lease lives before its unused tokens go back, `100ms` to `1s`"},
	{Name: "DENY_CACHE_MAX_AGE", Default: "1s", Functions: decide,
		Doc: "the longest a denial stays in an authorizer's deny cache, `100ms` to `1m`: a reset or refund reaches every warm instance within it"},
	{Name: "LEDGER_TABLE", DefaultDoc: "—", Functions: decideAdm,
		Doc: "the DynamoDB table holding global rules' budgets, shared by every Region (`-c globalRegions`); unset: global rules are decided as regional ones ([global](global.md))"},
	{Name: "GLOBAL_REGIONS", DefaultDoc: "—", Functions: decideAdm,
		Doc: "the Regions sharing `LEDGER_TABLE`, comma-separated (`us-east-1,us-east-2,us-west-2`): their count bounds a block at limit/(2·Regions) and sets the fail-open allowance"},
	{Name: "AWS_REGION", DefaultDoc: "set by Lambda", Functions: decideAdm,
		Doc: "this Region's name, under which the ledger records what it holds"},
	{Name: "LEDGER_ENDPOINT", DefaultDoc: "the Region's", Functions: decideAdm,
		Doc: "a DynamoDB endpoint URL, with dummy credentials: dynalite in tests and `sluice local --regions`"},
	{Name: "LEDGER_TIMEOUT", Default: "200ms", Functions: decide,
		Doc: "the budget of one ledger call, `10ms` to `5s`; only a request finding its Region's pool empty waits for one"},
	{Name: "GLOBAL_OPEN_SHARE", DefaultDoc: "1/Regions", Functions: decide,
		Doc: "the share of a fail-open global rule's limit a Region cut off from the ledger admits per window on its own, above 0 and at most 1"},
	{Name: "INSIGHTS_RULE_PREFIX", DefaultDoc: "—", Functions: []string{"admin-stats"},
		Doc: "prefix of the Contributor Insights rules `GET /stats` reads (`<prefix>-denied-subjects`, `-limiting-rules`, `-fail-open-rules`); unset: in-process counters, else 503"},
	{Name: "LOG_LEVEL", Default: "info", Functions: everything,
		Doc: "`debug`, `info`, `warn` or `error`"},
}

// lookupVar returns the row of name, or nil.
func lookupVar(name string) *Var {
	if i := slices.IndexFunc(Vars, func(v Var) bool { return v.Name == name }); i >= 0 {
		return &Vars[i]
	}
	return nil
}

// Markdown renders Vars as docs/config.md's table: a section per set of
// functions a variable changes, in the order of their first variable,
// each a table of variable, default, meaning in the order of Vars. Doc's
// relative links resolve from docs/, where the table lives.
func Markdown() string {
	var (
		readers []string
		rows    = map[string][]string{}
	)
	for _, v := range Vars {
		def := cmp.Or(v.DefaultDoc, "`"+v.Default+"`")
		r := strings.Join(v.Functions, ", ")
		if _, ok := rows[r]; !ok {
			readers = append(readers, r)
		}
		rows[r] = append(rows[r], "| `"+v.Name+"` | "+def+" | "+v.Doc+" |\n")
	}
	var b strings.Builder
	for i, r := range readers {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("## " + r + "\n\n| variable | default | meaning |\n| --- | --- | --- |\n")
		for _, row := range rows[r] {
			b.WriteString(row)
		}
	}
	return b.String()
}
