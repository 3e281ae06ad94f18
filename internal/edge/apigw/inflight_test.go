package apigw_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestInvokeInFlightStartedPerTTL: the REST authorizer sees no response,
// so nothing releases a slot it takes: a concurrency rule there bounds the
// requests started per TTL (docs/concurrency.md). The sample event's bytes
// through Invoke: with a limit of 2 and a 1 s TTL, the third request is
// denied, counted in the EMF line as InFlightDenials, and one passes again
// once the first slots expire.
func TestInvokeInFlightStartedPerTTL(t *testing.T) {
	t.Parallel()
	lim := limiter.New(testenv.Redis(t), limiter.Options{Prefix: testenv.Prefix(t, "apigw-inflight"), Timeout: time.Second})
	snap := rules.NewSnapshot([]rules.Rule{
		{ID: "exports", API: "*", Route: "GET /orders/{id}", Subject: "*", Kind: rules.Concurrency, Limit: new(int64(2)), Period: rules.Period(time.Second)},
	}, nil, rules.SnapshotOptions{})
	var emf bytes.Buffer
	m := metrics.New(metrics.Options{W: &emf, Function: "fn", Interval: time.Hour})
	h := apigw.NewHandler(authorizer.New(snaps{snap}, lim, authorizer.Options{Metrics: m}), apigw.Options{})
	payload, err := os.ReadFile(filepath.Join("..", "..", "..", "events", "authorizer-rest.json"))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	var effects []string
	for range 3 {
		_, effect, err := invokePrincipal(t, h, payload)
		if err != nil {
			t.Fatal(err)
		}
		effects = append(effects, effect)
	}
	if effects[0] != "Allow" || effects[1] != "Allow" || effects[2] != "Deny" {
		t.Fatalf("three requests under an in-flight limit of 2: %v, want Allow Allow Deny", effects)
	}
	m.Flush()
	got := map[string]float64{}
	for line := range strings.SplitSeq(strings.TrimSpace(emf.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("EMF line %q: %v", line, err)
		}
		if n, ok := v["InFlightDenials"].(float64); ok {
			if !strings.Contains(line, `{"Name":"InFlightDenials","Unit":"Count"}`) {
				t.Errorf("EMF line %q carries InFlightDenials without declaring it", line)
			}
			got["InFlightDenials"] += n
		}
		if n, ok := v["Decisions"].(float64); ok {
			got[v["Outcome"].(string)] += n
		}
	}
	if want := map[string]float64{"allow": 2, "deny": 1, "InFlightDenials": 1}; !maps.Equal(got, want) {
		t.Errorf("EMF counts = %v, want %v:\n%s", got, want, emf.String())
	}
	testenv.Await(t, 5*time.Second, 10*time.Millisecond, "a request passes once the slots' TTL ends", func() bool {
		_, effect, err := invokePrincipal(t, h, payload)
		return err == nil && effect == "Allow"
	})
	if held := time.Since(started); held < time.Second-20*time.Millisecond {
		t.Errorf("a slot freed after %v, before its 1 s TTL: something released it", held)
	}
}
