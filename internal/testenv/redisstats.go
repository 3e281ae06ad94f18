package testenv

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisCPU returns the Redis server's used_cpu_user + used_cpu_sys (INFO
// cpu), in seconds: the difference of two readings is what it spent
// between them, networking included.
func RedisCPU(t testing.TB, c *redis.Client) float64 {
	t.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("INFO cpu %s: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

// CmdStat is one command's line of INFO commandstats.
type CmdStat struct{ Calls, Usec float64 }

// CommandStats returns INFO commandstats by lowercase command name (Usec
// is usec_per_call).
func CommandStats(t testing.TB, c *redis.Client) map[string]CmdStat {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]CmdStat{}
	for line := range strings.SplitSeq(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, fields, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		var s CmdStat
		for kv := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				s.Calls = f
			case "usec_per_call":
				s.Usec = f
			}
		}
		out[name] = s
	}
	return out
}

// EnvInt is the positive integer the environment variable name holds, def
// when it is unset; the test fails on anything else.
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}
