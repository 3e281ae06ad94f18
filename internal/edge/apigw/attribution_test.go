package apigw_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestInvokeDenialAttribution: a denial is logged and counted under the
// subject whose bucket denied. REST events through Invoke, with
// DIMENSIONS=ip=ip: a flood of one-off keys from one IP is denied by the
// per-IP floor, and every denial line's principalId, and the stats' top
// denied subject, is the IP's hash, not one of the keys'; a key over its
// own limit is denied under the key's hash, from an IP whose floor holds.
func TestInvokeDenialAttribution(t *testing.T) {
	t.Parallel()
	dims, err := identity.ParseDimensions("ip=ip")
	if err != nil {
		t.Fatal(err)
	}
	floor := everywhere("ip-floor", 5, time.Minute)
	floor.Dimension = "ip"
	var logs bytes.Buffer
	st := newStats()
	a := decision(redisLimiter(t, "apigw-attr"), authorizer.Options{Dimensions: dims, Logger: jsonLog(&logs), Stats: st},
		everywhere("per-key", 3, time.Minute), floor)
	h := apigw.NewHandler(a, apigw.Options{})

	event := func(key, ip string) []byte {
		return edited(t, restSample(t), func(ev map[string]any) {
			ev["headers"].(map[string]any)["X-Api-Key"] = key
			ev["multiValueHeaders"].(map[string]any)["X-Api-Key"] = []string{key}
			ev["requestContext"].(map[string]any)["identity"].(map[string]any)["sourceIp"] = ip
		})
	}
	const flooder, keyIP, key = "198.51.100.66", "198.51.100.7", "key-over-its-limit"
	var allowed, denied int
	for i := range 40 {
		_, effect, err := invokePrincipal(t, h, event("one-off-"+strconv.Itoa(i)+"-"+testenv.Random(t), flooder))
		if err != nil {
			t.Fatal(err)
		}
		if effect == "Allow" {
			allowed++
		} else {
			denied++
		}
	}
	if allowed != 5 || denied != 35 {
		t.Fatalf("flood of one-off keys: %d allowed, %d denied; want the floor's 5 allowed, 35 denied", allowed, denied)
	}
	for range 4 {
		invokePrincipal(t, h, event(key, keyIP))
	}

	type line struct {
		Decision, PrincipalID, RuleID, Dimension string
	}
	var lines []line
	for raw := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Decision    string `json:"decision"`
			PrincipalID string `json:"principalId"`
			RuleID      string `json:"ruleId"`
			Dimension   string `json:"dimension"`
		}
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		lines = append(lines, line(l))
	}
	floorLine := line{authorizer.DecisionDeny, limiter.SubjectHash(flooder), "ip-floor", "ip"}
	keyLine := line{authorizer.DecisionDeny, limiter.SubjectHash(key), "per-key", identity.DefaultDimension}
	if len(lines) != 36 {
		t.Fatalf("%d decision lines, want 36 (35 floor denials, 1 key denial): %s", len(lines), logs.String())
	}
	for i, l := range lines[:35] {
		if l != floorLine {
			t.Errorf("flood denial line %d = %+v, want %+v (the IP's hash, not the one-off key's)", i, l, floorLine)
			break
		}
	}
	if lines[35] != keyLine {
		t.Errorf("key denial line = %+v, want %+v", lines[35], keyLine)
	}

	rep := st.Report(time.Minute, 10)
	if len(rep.Subjects) != 2 || rep.Subjects[0].Subject != limiter.SubjectHash(flooder) || rep.Subjects[0].Denied != 35 ||
		rep.Subjects[0].Rule != "ip-floor" || rep.Subjects[1].Subject != limiter.SubjectHash(key) || rep.Subjects[1].Denied != 1 {
		t.Errorf("stats top denied subjects = %+v; want the flooding IP's hash (35, ip-floor), then the key's (1)", rep.Subjects)
	}
}
