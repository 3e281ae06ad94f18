package apigw_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/edge/apigw"
)

// FuzzEvaluateWildcards checks resource matching against a regular
// expression built from the same IAM pattern.
func FuzzEvaluateWildcards(f *testing.F) {
	f.Add("arn:aws:execute-api:*:*:a1b2c3/*/GET/*", methodARN)
	f.Add("arn:*:execute-api:??-west-1:*", methodARN)
	f.Add("*a*b*c*", "xxaxxbxxcxx")
	f.Add("a?c", "abc")
	f.Fuzz(func(t *testing.T, pattern, arn string) {
		for _, s := range []string{pattern, arn} {
			for i := 0; i < len(s); i++ {
				if s[i] >= 0x80 || s[i] == '\n' {
					return // IAM resources are ASCII; keep the oracle simple
				}
			}
		}
		re := regexp.MustCompile(`^` + strings.NewReplacer(`\*`, `.*`, `\?`, `.`).Replace(regexp.QuoteMeta(pattern)) + `$`)
		policy := events.APIGatewayCustomAuthorizerPolicy{Statement: []events.IAMPolicyStatement{
			{Effect: "Allow", Action: []string{"execute-api:Invoke"}, Resource: []string{pattern}},
		}}
		if got, want := apigw.Evaluate(policy, arn), re.MatchString(arn); got != want {
			t.Fatalf("Evaluate(Allow %q, %q) = %v, want %v", pattern, arn, got, want)
		}
	})
}

// TestStringList: IAM's string-or-array element decodes from a string, an
// array of strings or null, and nothing else.
func TestStringList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want apigw.StringList
		err  string
	}{
		{`"execute-api:Invoke"`, apigw.StringList{"execute-api:Invoke"}, ""},
		{`["a", "b"]`, apigw.StringList{"a", "b"}, ""},
		{`[]`, apigw.StringList{}, ""},
		{`null`, nil, ""},
		{`""`, apigw.StringList{""}, ""},
		{`7`, nil, "not a number"},
		{`{"a":1}`, nil, "not an object"},
		{`true`, nil, "not a boolean"},
		{`["a", 1]`, nil, "want a string or an array of strings"},
	} {
		var got apigw.StringList
		err := json.Unmarshal([]byte(tc.in), &got)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Unmarshal(%s) error = %v, want one saying %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || !cmp.Equal(got, tc.want)):
			t.Errorf("Unmarshal(%s) = %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzStringList: any JSON decodes to the same list as a string (one
// element) or an array of strings does, or fails; what it decodes to
// encodes back as an array that decodes to itself.
func FuzzStringList(f *testing.F) {
	for _, s := range []string{`"a"`, `["a","b"]`, `[]`, `null`, `7`, `{"a":1}`, `"\u00e9"`, `["a",null]`, ` "x" `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got apigw.StringList
		err := json.Unmarshal(b, &got)
		var s string
		var a []string
		switch {
		case json.Unmarshal(b, &s) == nil && bytes.TrimSpace(b)[0] == '"':
			if err != nil || len(got) != 1 || got[0] != s {
				t.Fatalf("Unmarshal(%s) = %q, %v; want [%q]", b, got, err, s)
			}
		case json.Unmarshal(b, &a) == nil:
			if err != nil || !slices.Equal(got, a) {
				t.Fatalf("Unmarshal(%s) = %q, %v; want %q", b, got, err, a)
			}
		case err == nil:
			t.Fatalf("Unmarshal(%s) = %q; want an error (neither a string nor an array of strings)", b, got)
		}
		if err != nil {
			return
		}
		again, _ := json.Marshal(got)
		var back apigw.StringList
		if err := json.Unmarshal(again, &back); err != nil || !slices.Equal(back, got) {
			t.Fatalf("round trip of %q = %q, %v", got, back, err)
		}
	})
}

// FuzzPolicy: any bytes decode into a Policy or fail, never panic, and a
// policy that decodes is evaluated without panicking; one that allows an
// ARN allows it again after a round trip through JSON (arrays).
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{
		`{"Version":"2012-10-17","Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"*"}]}`,
		`{"Statement":{"NotAction":["s3:*"],"Effect":"Allow","NotResource":"arn:*:POST/*"}}`,
		`{"Statement":[{"Action":"*","Effect":"Deny","Resource":["a","b"],"Condition":{}}]}`,
		`{"Statement":null}`, `{"Statement":"x"}`, `[]`,
	} {
		f.Add([]byte(s), methodARN)
	}
	f.Fuzz(func(t *testing.T, b []byte, arn string) {
		var p apigw.Policy
		if json.Unmarshal(b, &p) != nil {
			return
		}
		allowed, err := p.Allows(arn)
		if err != nil && allowed {
			t.Fatalf("Allows(%s) = true with error %v", b, err)
		}
		again, err2 := json.Marshal(p)
		if err2 != nil {
			t.Fatalf("Marshal(%+v): %v", p, err2)
		}
		var back apigw.Policy
		if err := json.Unmarshal(again, &back); err != nil {
			t.Fatalf("Unmarshal(Marshal(%s)) = %v", b, err)
		}
		if a2, e2 := back.Allows(arn); a2 != allowed || (e2 == nil) != (err == nil) {
			t.Fatalf("Allows after a round trip = %v, %v; before %v, %v (%s)", a2, e2, allowed, err, b)
		}
	})
}

// TestPolicyAllows: IAM's evaluation, as API Gateway applies it to an
// authorizer's policy, over the element forms it takes.
func TestPolicyAllows(t *testing.T) {
	t.Parallel()
	const api = "arn:aws:execute-api:eu-west-1:123456789012:a1b2c3"
	for _, tc := range []struct {
		name, policy string
		want         bool
		err          string
	}{
		{"strings", `{"Statement":[{"Action":"execute-api:Invoke","Effect":"Allow","Resource":"` + methodARN + `"}]}`, true, ""},
		{"one object", `{"Statement":{"Action":"execute-api:*","Effect":"Allow","Resource":"` + api + `/*"}}`, true, ""},
		{"no statement", `{"Statement":[]}`, false, ""},
		{"null statement", `{"Statement":null}`, false, ""},
		{"NotResource excludes this arn", `{"Statement":[{"Action":"*","Effect":"Allow","NotResource":"` + api + `/*/GET/*"}]}`, false, ""},
		{"NotResource excludes another", `{"Statement":[{"Action":"*","Effect":"Allow","NotResource":["` + api + `/*/POST/*"]}]}`, true, ""},
		{"deny with NotResource", `{"Statement":[{"Action":"*","Effect":"Allow","Resource":"*"},{"NotAction":"s3:*","Effect":"Deny","NotResource":"` + api + `/*/POST/*"}]}`, false, ""},
		{"NotAction matching invoke", `{"Statement":[{"NotAction":"execute-api:*","Effect":"Allow","Resource":"*"}]}`, false, ""},
		{"an empty Condition", `{"Statement":[{"Action":"*","Effect":"Allow","Resource":"*","Condition":{}}]}`, true, ""},
		{"a Condition", `{"Statement":[{"Action":"*","Effect":"Deny","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`, false, "has a Condition"},
		{"an invalid statement after a Deny", `{"Statement":[{"Action":"*","Effect":"Deny","Resource":"*"},{"Effect":"Allow","Resource":"*"}]}`, false, "statement 2: want exactly one of Action and NotAction"},
		{"an empty Action", `{"Statement":[{"Action":[],"Effect":"Allow","Resource":"*"}]}`, false, "want exactly one of Action and NotAction"},
	} {
		var p apigw.Policy
		if err := json.Unmarshal([]byte(tc.policy), &p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := p.Allows(methodARN)
		if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Allows = %v, %v; want %v, error %q", tc.name, got, err, tc.want, tc.err)
		}
	}
}
