package apigw_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/authorizer/apigw"
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
