package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/store/memory"
	"github.com/sluicehq/sluice/internal/testenv"
)

func mustMemory() store.Store { return memory.New() }

// testLimiter is a limiter on the test Redis under a prefix of name's,
// whose keys go when the test ends. Its 2 s timeout is for peeks under
// -race on a shared 2-core machine (the authorizer's is 25 ms).
func testLimiter(t *testing.T, name string) *limiter.Limiter {
	t.Helper()
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, name)
	testenv.DeleteKeys(t, rdb, prefix)
	return limiter.New(rdb, limiter.Options{Prefix: prefix, Timeout: 2 * time.Second})
}

// events0 is a request identity with neither user ARN nor caller.
func events0() events.APIGatewayRequestIdentity {
	return events.APIGatewayRequestIdentity{SourceIP: "203.0.113.7"}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// brokenStore fails on demand: fail makes ListRules return an error whose
// text must never reach a client; timeout makes GetRule time out.
type brokenStore struct {
	store.Store
	fail, timeout bool
}

func (b *brokenStore) ListRules(ctx context.Context, f rules.Filter) (rules.Page, error) {
	if b.fail {
		return rules.Page{}, errors.New("list rules: dial tcp 10.0.0.5:5432: password s3cr3t rejected")
	}
	return b.Store.ListRules(ctx, f)
}

func (b *brokenStore) GetRule(ctx context.Context, id string) (rules.Rule, error) {
	if b.timeout {
		return rules.Rule{}, fmt.Errorf("get rule: %w", context.DeadlineExceeded)
	}
	return b.Store.GetRule(ctx, id)
}

// failingPublisher is a Redis that refuses the publish.
type failingPublisher struct{}

func (failingPublisher) Publish(context.Context, rules.Set) (bool, error) {
	return false, errors.New("publish rules snapshot sl:{rules}:snapshot: connection refused")
}

// flakyPublisher refuses its first failures publishes, as a Redis failing
// over does, then takes them.
type flakyPublisher struct {
	failures  int32
	calls     atomic.Int32
	published atomic.Int32
}

func (f *flakyPublisher) Publish(context.Context, rules.Set) (bool, error) {
	if f.calls.Add(1) <= f.failures {
		return false, errors.New("publish rules snapshot: dial tcp 10.0.0.7:6379: i/o timeout")
	}
	f.published.Add(1)
	return true, nil
}

// newHTTPServer serves h, its answers checked against openapi.yaml.
func newHTTPServer(t *testing.T, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(contract.wrap(h))
	t.Cleanup(srv.Close)
	return srv
}

type httpResponse struct {
	status int
	header http.Header
	body   string
}

// httpDo sends one request; headers are name, value pairs.
func httpDo(t *testing.T, srv *httptest.Server, method, path, body string, headers ...string) httpResponse {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpResponse{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// manyFields returns n JSON members "f0000":1, "f0001":1, ... without braces.
func manyFields(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"f%04d":1`, i)
	}
	return b.String()
}
