package testenv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestPrefix(t *testing.T) {
	t.Parallel()
	a, b := testenv.Prefix(t, "x"), testenv.Prefix(t, "x")
	if a == b || !strings.HasPrefix(a, "sltest:x:") || !strings.HasSuffix(a, ":") || len(a) != len("sltest:x:")+12+1 {
		t.Errorf("Prefix(x) = %q, %q; want two different sltest:x:<12 hex>:", a, b)
	}
}

func TestRedisDeleteKeys(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "testenv")
	ctx := context.Background()
	t.Run("write", func(t *testing.T) {
		testenv.DeleteKeys(t, rdb, prefix)
		for _, k := range []string{"a", "b"} {
			if err := rdb.Set(ctx, prefix+k, "1", 0).Err(); err != nil {
				t.Fatalf("SET %s: %v", prefix+k, err)
			}
		}
	})
	if n, err := rdb.Exists(ctx, prefix+"a", prefix+"b").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS after DeleteKeys = %d, %v; want 0", n, err)
	}
}
