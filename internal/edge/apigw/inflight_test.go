package apigw_test

import (
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
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
	var emf bytes.Buffer
	m := metrics.New(metrics.Options{W: &emf, Function: "fn", Interval: time.Hour})
	h := apigw.NewHandler(decision(redisLimiter(t, "apigw-inflight"), authorizer.Options{Metrics: m},
		rules.Rule{ID: "exports", API: "*", Route: "GET /orders/{id}", Subject: "*", Kind: rules.Concurrency, Limit: new(int64(2)), Period: rules.Period(time.Second)}),
		apigw.Options{})
	payload := sample(t, "authorizer-rest.json")
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
	for _, l := range emfLines[map[string]any](t, &emf) {
		if n, ok := l.v["InFlightDenials"].(float64); ok {
			if !strings.Contains(l.text, `{"Name":"InFlightDenials","Unit":"Count"}`) {
				t.Errorf("EMF line %q carries InFlightDenials without declaring it", l.text)
			}
			got["InFlightDenials"] += n
		}
		if n, ok := l.v["Decisions"].(float64); ok {
			got[l.v["Outcome"].(string)] += n
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
