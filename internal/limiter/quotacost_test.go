package limiter

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestQuotaCostParts takes apart what two calendar quotas add to a
// decision over two token buckets on Redis (issue 24's "2 rate + 2 quota"
// figure), with pairedCost: the 2-bucket charge against the 2 rate + 2
// quota charge, and against variants of it that are wrong on purpose (they
// are measurements, never run by the Limiter), each cutting one part:
//
//	quota loop without INCRBY  the quotas' keys, arguments and code, the
//	                           INCRBY replaced by a constant
//	quota loop cut to INCRBY   the quota code cut to its INCRBY and two
//	                           stores: the least Lua a charged quota needs
//	INCR for INCRBY            the same script with INCR (cost 1)
//	no quota loop              the quotas' keys and arguments, carried
//	                           through step 1's first loop and step 2,
//	                           but never read or charged
//
// It logs each one's quartiles, over the rounds, of its ratio to the
// 2-bucket decision: decisions per second, Redis CPU per decision and the
// script's usec_per_call. docs/performance.md ("Round four") has a run.
//
//	SLUICE_QUOTA_COST=1 SLUICE_QUOTA_COST_ROUNDS=14 scripts/testenv.sh go test -count=1 -run TestQuotaCostParts -v ./internal/limiter/
func TestQuotaCostParts(t *testing.T) {
	if os.Getenv("SLUICE_QUOTA_COST") == "" {
		t.Skip("SLUICE_QUOTA_COST=1 runs it")
	}
	rounds := testenv.EnvInt(t, "SLUICE_QUOTA_COST_ROUNDS", 14)
	// BenchmarkAllow's buckets.
	api := Bucket{ID: "api", Limit: 1_000_000, Period: time.Second}
	route := Bucket{ID: "route", Limit: 1_000_000, Period: time.Second}
	two := []Bucket{api, route}
	four := []Bucket{api, route,
		{ID: "q-day", Limit: 1_000_000_000, Period: 24 * time.Hour, Window: Daily, Anchor: time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)},
		{ID: "q-month", Limit: 1_000_000_000, Period: 24 * time.Hour, Window: Monthly}}

	const incrby = "redis.pcall('INCRBY', KEYS[i], cs)"
	// The quota loop is the last statement of bucket.lua's "if quotas
	// then" block: a variant replaces it, to that block's end.
	const loop = "\tfor i = 1, n do\n\t\tif st[4 * i - 1] < 0 then\n\t\t\tlocal limit = tonumber("
	at := strings.Index(bucketSrc, loop)
	if strings.Count(bucketSrc, loop) != 1 || !strings.HasSuffix(bucketSrc, "\nend\n") || strings.Count(chargeSrc, incrby) != 1 {
		t.Fatal("bucket.lua's quota loop has changed: update the variants")
	}
	script := func(src string) *redis.Script { return redis.NewScript(src) }
	withLoop := func(body string) *redis.Script {
		return script("local charging, every_end = true, false\n" + bucketSrc[:at] +
			"\tfor i = 1, n do\n\t\tif st[4 * i - 1] < 0 then\n" + body + "\t\tend\n\tend\nend\n" + chargeLua + "return out\n")
	}
	sides := []struct {
		name string
		costSide
	}{
		{"2 rate (charge.lua)", costSide{chargeScript, two}},
		{"2 rate + 2 quota (charge.lua)", costSide{chargeScript, four}},
		{"quota loop without INCRBY", costSide{script(strings.Replace(chargeSrc, incrby, "cost + 4", 1)), four}},
		{"quota loop cut to INCRBY", costSide{withLoop("\t\t\tlocal r = " + incrby + "\n" +
			"\t\t\tst[4 * i - 2], st[4 * i] = tonumber(ARGV[4 * i - 2]) + cost - r, 1\n\t\t\tspec = 1\n"), four}},
		{"INCR for INCRBY", costSide{script(strings.Replace(chargeSrc, incrby, "redis.pcall('INCR', KEYS[i])", 1)), four}},
		{"no quota loop", costSide{withLoop("\t\t\tst[4 * i - 2] = 1e9\n"), four}},
	}
	cs := make([]costSide, len(sides))
	for i, s := range sides {
		cs[i] = s.costSide
	}
	ratios := pairedCost(t, rounds, 20_000, cs)
	for i, s := range sides[1:] {
		r := ratios[i+1]
		t.Logf("%-30s ÷ 2 rate, p25 / median / p75 over %d rounds: decisions/s %s; Redis CPU %s; usec_per_call %s",
			s.name, rounds, quartiles(r.rate), quartiles(r.cpu), quartiles(r.usec))
	}
}
