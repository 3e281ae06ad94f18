package testenv_test

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

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

// recorder is a testing.TB that records how Lookup stopped the test.
type recorder struct {
	testing.TB
	stopped string // "fatal" or "skip"
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.stopped = "fatal"; runtime.Goexit() }
func (r *recorder) Skipf(string, ...any)  { r.stopped = "skip"; runtime.Goexit() }

// TestLookupUnset pins the rule that keeps CI honest: an unset variable
// skips the test, but fails it under SLUICE_REQUIRE_INTEGRATION=1.
func TestLookupUnset(t *testing.T) {
	const name = "SLUICE_TEST_TESTENV_UNSET"
	t.Setenv(name, "")
	for _, tc := range []struct{ require, want string }{{"", "skip"}, {"1", "fatal"}} {
		t.Setenv(testenv.RequireVar, tc.require)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			testenv.Lookup(r, name)
		}()
		<-done
		if r.stopped != tc.want {
			t.Errorf("Lookup(unset) with %s=%q stopped the test with %q, want %q", testenv.RequireVar, tc.require, r.stopped, tc.want)
		}
	}
}

// TestDynamoDBURL: the URL names a DynamoDB API that answers ListTables
// (dynalite checks that a request is signed, not the signature).
func TestDynamoDBURL(t *testing.T) {
	t.Parallel()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, testenv.DynamoDBURL(t), strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Date", "20000101T000000Z")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20000101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ListTables: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ListTables = %s, want 200 OK", resp.Status)
	}
}

// TestRedisServerRestart: a private server restarts on the same address,
// empty.
func TestRedisServerRestart(t *testing.T) {
	t.Parallel()
	s := testenv.StartRedis(t)
	c := testenv.Client(t, "redis://"+s.Addr, nil)
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	s.Kill()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Errorf("PING after Kill succeeded, want an error")
	}
	s.Restart(t)
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS k after Restart = %d, %v; want 0 (nothing persisted)", n, err)
	}
}

// TestProxyDelay: a delayed proxy adds its delay to every round trip, and
// forwards at once again when the delay is cleared.
func TestProxyDelay(t *testing.T) {
	t.Parallel()
	s := testenv.StartRedis(t)
	p := testenv.NewProxy(t, s.Addr)
	p.Up(t)
	c := testenv.Client(t, "redis://"+p.Addr(), nil)
	ctx := context.Background()
	for _, d := range []time.Duration{0, 50 * time.Millisecond, 0} {
		p.SetDelay(d)
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("PING with delay %v: %v", d, err)
		}
		took := time.Since(start)
		if took < d || took > d+40*time.Millisecond {
			t.Errorf("PING with delay %v took %v, want %v to %v", d, took, d, d+40*time.Millisecond)
		}
	}
}
