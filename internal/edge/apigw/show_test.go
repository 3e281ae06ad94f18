package apigw_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestInvokeShownSubjects: SUBJECT_SHOW (Options.ShowSubjects) shows an
// identity as sent, and never a credential, even when the opt-in names
// its kind. REST events through Invoke, sources header, query, apikey, ip;
// each subject is denied once. The IP's denial line carries "subject" and
// the stats show it beside its hash; no log line and no stats report
// holds the header, query or API key value anywhere, only its hash.
func TestInvokeShownSubjects(t *testing.T) {
	t.Parallel()
	sources, err := identity.ParseSources("header:x-api-key,query:api_key,apikey,ip")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	st := newStats()
	a := decision(redisLimiter(t, "apigw-show"), authorizer.Options{Sources: sources, Logger: jsonLog(&logs), Stats: st,
		// Every kind, credentials included: the core must refuse those.
		ShowSubjects: []identity.SourceKind{identity.SourceHeader, identity.SourceQuery, identity.SourceAPIKey,
			identity.SourceIP, identity.SourceJWT, identity.SourcePrincipal, identity.SourceContext}},
		everywhere("one", 1, time.Minute))
	h := apigw.NewHandler(a, apigw.Options{Logger: jsonLog(&logs)})

	r := testenv.Random(t)
	header, query, apiKey, ip := "hdr-secret-"+r, "qry-secret-"+r, "apikey-secret-"+r, "198.51.100.99"
	event := func(set func(ev map[string]any)) []byte {
		return edited(t, restSample(t), func(ev map[string]any) {
			ev["queryStringParameters"] = map[string]any{}
			ev["multiValueQueryStringParameters"] = map[string]any{}
			ev["requestContext"].(map[string]any)["identity"].(map[string]any)["sourceIp"] = ip
			set(ev)
		})
	}
	events := map[string][]byte{
		"header": event(func(ev map[string]any) {
			ev["headers"].(map[string]any)["X-Api-Key"] = header
			ev["multiValueHeaders"].(map[string]any)["X-Api-Key"] = []string{header}
		}),
		"query": event(func(ev map[string]any) {
			ev["queryStringParameters"] = map[string]any{"api_key": query}
			ev["multiValueQueryStringParameters"] = map[string]any{"api_key": []string{query}}
		}),
		"apikey": event(func(ev map[string]any) {
			ev["requestContext"].(map[string]any)["identity"].(map[string]any)["apiKey"] = apiKey
		}),
		"ip": event(func(map[string]any) {}),
	}
	for name, ev := range events {
		for i := range 2 {
			_, effect, err := invokePrincipal(t, h, ev)
			if err != nil {
				t.Fatalf("%s request %d: %v", name, i, err)
			}
			if want := []string{"Allow", "Deny"}[i]; effect != want {
				t.Fatalf("%s request %d: %s, want %s", name, i, effect, want)
			}
		}
	}

	out := logs.String()
	rep, _ := json.Marshal(st.Report(time.Minute, 10))
	for _, secret := range []string{header, query, apiKey, r} {
		if strings.Contains(out, secret) {
			t.Errorf("a credential (%q) is in the log:\n%s", secret, out)
		}
		if strings.Contains(string(rep), secret) {
			t.Errorf("a credential (%q) is in the stats: %s", secret, rep)
		}
	}
	shown := map[string]string{} // principalId → subject
	for raw := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		var l struct {
			PrincipalID string  `json:"principalId"`
			Subject     *string `json:"subject"`
		}
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if l.Subject != nil {
			shown[l.PrincipalID] = *l.Subject
		}
	}
	if want := map[string]string{limiter.SubjectHash(ip): ip}; len(shown) != 1 || shown[limiter.SubjectHash(ip)] != ip {
		t.Errorf("subjects shown in the log = %v, want only the IP's: %v", shown, want)
	}
	got := map[string]string{}
	for _, s := range st.Report(time.Minute, 10).Subjects {
		got[s.Subject] = s.Shown
	}
	want := map[string]string{limiter.SubjectHash(header): "", limiter.SubjectHash(query): "",
		limiter.SubjectHash(apiKey): "", limiter.SubjectHash(ip): ip}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("stats subject %s shown = %q (listed %v), want %q", k, g, ok, v)
		}
	}
}

// TestInvokeSubjectsHashedByDefault: without SUBJECT_SHOW an identity is
// a hash only too.
func TestInvokeSubjectsHashedByDefault(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	st := newStats()
	a := decision(redisLimiter(t, "apigw-hide"), authorizer.Options{Sources: []identity.Source{{Kind: identity.SourceIP}},
		Logger: jsonLog(&logs), Stats: st}, everywhere("one", 1, time.Minute))
	h := apigw.NewHandler(a, apigw.Options{})
	ev := restSample(t)
	for range 2 {
		if _, _, err := invokePrincipal(t, h, ev); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(logs.String(), sampleIP) || strings.Contains(logs.String(), `"subject"`) {
		t.Errorf("the subject is in the log without SUBJECT_SHOW:\n%s", logs.String())
	}
	if s := st.Report(time.Minute, 10).Subjects; len(s) != 1 || s[0].Shown != "" || s[0].Subject != limiter.SubjectHash(sampleIP) {
		t.Errorf("stats subjects = %+v, want the IP's hash only", s)
	}
}
