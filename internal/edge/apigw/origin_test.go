package apigw_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/metrics"
)

// originSecret is the value the distribution would send.
const originSecret = "3mN8qXr2Lw9vTz4kYb7cHd1fJg6sPa0e"

// withOrigin returns the sample event file (events/) with its
// X-Origin-Verify header set to values: none when empty; a REST sample
// gets them in the multi-value map and the last in the single-value one,
// as API Gateway sends a repeated header; an HTTP API sample gets them
// joined with commas, as its payload 2.0 does. name is the header's
// spelling.
func withOrigin(t *testing.T, file, name string, values ...string) []byte {
	t.Helper()
	return edited(t, sample(t, file), func(ev map[string]any) {
		if len(values) == 0 {
			return
		}
		headers := ev["headers"].(map[string]any)
		if multi, ok := ev["multiValueHeaders"].(map[string]any); ok {
			headers[name] = values[len(values)-1]
			multi[name] = values
		} else {
			headers[name] = strings.Join(values, ",")
		}
	})
}

// TestInvokeOriginVerify sends the recorded REST and HTTP API events
// through Invoke, the Lambda's entry point, to a handler that requires
// the origin-verify value: only the one value, sent once, reaches the
// decision; everything else is Unauthorized (401) with no decision
// counted, and the warn line never carries what was sent.
func TestInvokeOriginVerify(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := jsonLog(&logs)
	var emf bytes.Buffer
	m := metrics.New(metrics.Options{W: &emf, Function: "test", Interval: time.Hour})
	h := apigw.NewHandler(decision(redisLimiter(t, "apigw-origin"), authorizer.Options{Logger: log}, everywhere("two", 2, time.Hour)),
		apigw.Options{Logger: log, Metrics: m, OriginVerify: originSecret})

	// a second spelling of the header beside the first
	twoKeys := edited(t, withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", originSecret), func(ev map[string]any) {
		ev["headers"].(map[string]any)["x-origin-verify"] = originSecret
	})
	refused := []struct {
		name    string
		payload []byte
	}{
		{"REST without the header", withOrigin(t, "authorizer-rest.json", "")},
		{"REST wrong value, same length", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", strings.Repeat("x", len(originSecret)))},
		{"REST a prefix of the value", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", originSecret[:16])},
		{"REST the value and more", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", originSecret+"0")},
		{"REST empty value", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", "")},
		{"REST spaces around", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", " "+originSecret+" ")},
		{"REST 64 KB value", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", strings.Repeat(originSecret, 2048))},
		{"REST non-ASCII value", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", "ñ"+originSecret[2:]+"\u202e")},
		{"REST invalid UTF-8", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", "\xff"+originSecret[1:])},
		{"REST the value twice", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", originSecret, originSecret)},
		{"REST a wrong value, then the value", withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", "guess", originSecret)},
		{"REST two spellings of the header", twoKeys},
		{"HTTP without the header", withOrigin(t, "authorizer-http.json", "")},
		{"HTTP wrong value", withOrigin(t, "authorizer-http.json", "x-origin-verify", "guess-guess-guess-guess")},
		{"HTTP the value twice", withOrigin(t, "authorizer-http.json", "x-origin-verify", originSecret, originSecret)},
	}
	for _, tc := range refused {
		out, err := h.Invoke(t.Context(), tc.payload)
		if !errors.Is(err, apigw.ErrUnauthorized) || err.Error() != "Unauthorized" {
			t.Errorf("%s: Invoke = %s, %v; want the error Unauthorized (401)", tc.name, out, err)
		}
	}
	if got := strings.Count(logs.String(), "request not through the edge's distribution"); got != len(refused) {
		t.Errorf("%d warn lines for %d refusals:\n%s", got, len(refused), logs.String())
	}
	if strings.Contains(logs.String(), "guess") || strings.Contains(logs.String(), originSecret[:8]) {
		t.Errorf("the refusals' lines carry a value sent:\n%s", logs.String())
	}

	// Nothing was counted: the limit of 2 is whole for the good requests,
	// the header spelled as the distribution sends it or as a client would.
	var effects []string
	for _, name := range []string{"X-Origin-Verify", "x-origin-verify", "X-Origin-Verify"} {
		_, effect, err := invokePrincipal(t, h, withOrigin(t, "authorizer-rest.json", name, originSecret))
		if err != nil {
			t.Fatalf("Invoke(the value in %s) error: %v", name, err)
		}
		effects = append(effects, effect)
	}
	if strings.Join(effects, " ") != "Allow Allow Deny" {
		t.Errorf("three verified requests under a limit of 2: %v, want Allow Allow Deny (a refusal was counted)", effects)
	}
	out, err := h.Invoke(t.Context(), withOrigin(t, "authorizer-http.json", "x-origin-verify", originSecret))
	if err != nil || !strings.Contains(string(out), `"isAuthorized":true`) {
		t.Errorf("Invoke(HTTP event with the value) = %s, %v; want isAuthorized true", out, err)
	}
	m.Flush()
	if want := fmt.Sprintf(`"Outcome":"unauthorized","Decisions":%d}`, len(refused)); !strings.Contains(emf.String(), want) {
		t.Errorf("metrics after %d refusals:\n%s", len(refused), emf.String())
	}
}

// TestOriginVerifyOff: with no value to require, the header means nothing,
// present or not.
func TestOriginVerifyOff(t *testing.T) {
	t.Parallel()
	h := apigw.NewHandler(decision(redisLimiter(t, "apigw-origin-off"), authorizer.Options{}, everywhere("many", 100, time.Hour)), apigw.Options{})
	for _, p := range [][]byte{
		withOrigin(t, "authorizer-rest.json", ""),
		withOrigin(t, "authorizer-rest.json", "X-Origin-Verify", "anything", "at all"),
	} {
		if _, effect, err := invokePrincipal(t, h, p); err != nil || effect != "Allow" {
			t.Errorf("Invoke without an origin check = %s, %v; want Allow", effect, err)
		}
	}
}
