package apigw

import (
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Evaluate reports whether policy allows invoking methodARN, the way API
// Gateway evaluates an authorizer's policy: a matching Deny statement wins,
// else a matching Allow statement allows, else the request is denied.
// Actions match case-insensitively, resources case-sensitively; both take
// the IAM wildcards * (any run of characters) and ? (one character). The
// local gateway uses it to act on the authorizer's answer as API Gateway
// would.
func Evaluate(policy events.APIGatewayCustomAuthorizerPolicy, methodARN string) bool {
	allowed := false
	for _, s := range policy.Statement {
		if !anyMatch(s.Action, InvokeAction, true) || !anyMatch(s.Resource, methodARN, false) {
			continue
		}
		switch {
		case strings.EqualFold(s.Effect, "Deny"):
			return false
		case strings.EqualFold(s.Effect, "Allow"):
			allowed = true
		}
	}
	return allowed
}

func anyMatch(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			p, s = strings.ToLower(p), strings.ToLower(s)
		}
		if wildcardMatch(p, s) {
			return true
		}
	}
	return false
}

// wildcardMatch matches s against an IAM pattern with * and ?, iteratively
// (linear backtracking on the last star), so no pattern is exponential.
func wildcardMatch(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
