package ratelimit_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestFromEnvRefusesAsConfig feeds each variable both readers parse good
// and bad values, and wants ratelimit.FromEnv and config.FromEnv (the
// Lambdas') to refuse the same ones with the same line.
func TestFromEnvRefusesAsConfig(t *testing.T) {
	for _, tt := range []struct {
		name      string
		good, bad []string
	}{
		{"REDIS_TIMEOUT", []string{"1ms", "250ms", " 10s "}, []string{"0", "0s", "999us", "11s", "-1s", "soon"}},
		{"REDIS_POOL_SIZE", []string{"1", "1024"}, []string{"0", "1025", "-3", "2.5", "x"}},
		{"LEASE_MAX", []string{"1", "64", "10000"}, []string{"0", "10001", "many"}},
	} {
		for _, v := range append(tt.good, tt.bad...) {
			t.Run(tt.name+"="+v, func(t *testing.T) {
				_, cerr := config.FromEnv(func(k string) string {
					if k == tt.name {
						return v
					}
					return ""
				})
				t.Setenv(tt.name, v)
				rl, rerr := ratelimit.FromEnv(context.Background())
				if rerr == nil {
					rl.Close()
				}
				got, want := linesNaming(rerr, tt.name), linesNaming(cerr, tt.name)
				if !slices.Equal(got, want) {
					t.Errorf("%s=%q: ratelimit.FromEnv refuses with %q, config.FromEnv with %q", tt.name, v, got, want)
				}
				if bad := slices.Contains(tt.bad, v); bad != (len(want) == 1) {
					t.Errorf("%s=%q: config.FromEnv refuses with %q, want one line for a bad value, none for a good one", tt.name, v, want)
				}
			})
		}
	}
}

// linesNaming is err's lines that start with "name: ", a package's
// "ratelimit: " prefix cut.
func linesNaming(err error, name string) []string {
	var out []string
	if err == nil {
		return nil
	}
	for l := range strings.SplitSeq(err.Error(), "\n") {
		if l = strings.TrimPrefix(l, "ratelimit: "); strings.HasPrefix(l, name+": ") {
			out = append(out, l)
		}
	}
	return out
}
