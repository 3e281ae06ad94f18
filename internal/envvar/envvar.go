// Package envvar parses the environment variables that both
// internal/config (the Lambdas, sluice local) and ratelimit.FromEnv read,
// one parser and one range per variable, so both refuse the same values
// with the same message. It links nothing but the standard library, as
// package ratelimit must not link the AWS SDK that internal/config does.
package envvar

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a duration variable from Min to Max.
type Duration struct {
	Name     string
	Min, Max time.Duration
	// Example is the value a refusal suggests, such as "25ms".
	Example string
}

// Parse reads s (space around it ignored); the error names d.Name.
func (d Duration) Parse(s string) (time.Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s: %q is not a duration such as %q", d.Name, s, d.Example)
	case v < d.Min || v > d.Max:
		return 0, fmt.Errorf("%s: %s is out of range %s to %s", d.Name, v, d.Min, d.Max)
	}
	return v, nil
}

// Int is a whole-number variable from Min to Max.
type Int struct {
	Name     string
	Min, Max int
	// MinMeans, when set, is what Min means, shown in a refusal.
	MinMeans string
}

// Parse reads s (space around it ignored); the error names i.Name.
func (i Int) Parse(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < i.Min || n > i.Max {
		lo := strconv.Itoa(i.Min)
		if i.MinMeans != "" {
			lo += " (" + i.MinMeans + ")"
		}
		return 0, fmt.Errorf("%s: %q is not a whole number from %s to %d", i.Name, s, lo, i.Max)
	}
	return n, nil
}

// The variables both readers share.
var (
	RedisTimeout  = Duration{Name: "REDIS_TIMEOUT", Min: time.Millisecond, Max: 10 * time.Second, Example: "25ms"}
	RedisPoolSize = Int{Name: "REDIS_POOL_SIZE", Min: 1, Max: 1024}
	LeaseMax      = Int{Name: "LEASE_MAX", Min: 1, Max: 10000, MinMeans: "no leases"}
)

// List is a comma list's items, trimmed, without empty ones; nil for "".
func List(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
