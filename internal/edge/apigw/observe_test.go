package apigw_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
)

// TestObserving: an observed copy of an Authorizer tells its Observe of
// each decision Invoke makes (the entry the Lambda runtime calls), the
// unauthorized one included; the Authorizer it was copied from tells none.
func TestObserving(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var (
		mu  sync.Mutex
		got []string
	)
	obs := f.auth.Observing(func(o authorizer.Observation) {
		mu.Lock()
		defer mu.Unlock()
		if o.Duration <= 0 {
			t.Errorf("Observe Duration = %v, want > 0", o.Duration)
		}
		got = append(got, o.API+" "+o.Rule+" "+o.Outcome)
	})
	invoke := func(h *apigw.Handler, key string) {
		ev := restEvent(key)
		if key == "" {
			delete(ev.Headers, "X-Api-Key")
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = h.Invoke(ctx, payload)
	}
	for range 3 {
		invoke(obs, "key-obs")
	}
	invoke(obs, "")
	invoke(f.auth, "key-other") // not observed
	want := []string{"a1b2c3 r-order allow", "a1b2c3 r-order allow", "a1b2c3 r-order deny", "a1b2c3  unauthorized"}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("observed %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("observed #%d = %q, want %q", i, got[i], want[i])
		}
	}
}
