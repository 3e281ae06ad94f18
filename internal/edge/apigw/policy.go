package apigw

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Policy is an IAM policy document as a Lambda authorizer answers it, read
// in every form IAM's grammar allows: Statement one object or an array of
// them; Action, NotAction, Resource and NotResource each a string or an
// array of strings (AWS's own authorizer examples use strings).
type Policy struct {
	Version   string
	Statement Statements
}

// Statements is a policy's Statement: one statement object or an array.
type Statements []Statement

// UnmarshalJSON reads one statement object or an array of them.
func (s *Statements) UnmarshalJSON(b []byte) error {
	return oneOrMany((*[]Statement)(s), b, '{', "", "Statement: want a statement object or an array of them")
}

// Statement is one statement of an authorizer's policy. Exactly one of
// Action and NotAction, and one of Resource and NotResource, is set.
type Statement struct {
	Sid         string
	Effect      string // Allow or Deny
	Action      StringList
	NotAction   StringList
	Resource    StringList
	NotResource StringList
	// Condition is kept to be refused: Sluice does not evaluate IAM
	// conditions, so a statement with one is not read as if it had none.
	Condition json.RawMessage
}

// StringList is an IAM string-or-array element: "a" or ["a", "b"].
type StringList []string

// UnmarshalJSON reads a string, an array of strings or null.
func (l *StringList) UnmarshalJSON(b []byte) error {
	const want = "want a string or an array of strings"
	return oneOrMany((*[]string)(l), b, '"', want, want)
}

// oneOrMany decodes b into *out as IAM writes a list: null is none, a
// value whose first byte is one is a list of it, an array is the list.
// An array that does not decode is an error prefixed with arrayWant
// ("" none); any other value is want and what it is.
func oneOrMany[T any](out *[]T, b []byte, one byte, arrayWant, want string) error {
	switch jsonKind(b) {
	case 'n':
		*out = nil
		return nil
	case one:
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*out = []T{v}
		return nil
	case '[':
		var vs []T
		if err := json.Unmarshal(b, &vs); err != nil {
			if arrayWant != "" {
				return fmt.Errorf("%s: %w", arrayWant, err)
			}
			return err
		}
		*out = vs
		return nil
	}
	return fmt.Errorf("%s, not %s", want, kindName(b))
}

// jsonKind is the first byte of a JSON value ('n' for null), as
// encoding/json hands it to UnmarshalJSON: without leading space.
func jsonKind(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func kindName(b []byte) string {
	switch jsonKind(b) {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// check says what makes s a statement Sluice cannot evaluate as API
// Gateway would.
func (s *Statement) check() error {
	switch {
	case !strings.EqualFold(s.Effect, "Allow") && !strings.EqualFold(s.Effect, "Deny"):
		//lint:ignore ST1005 it names the policy's JSON field, as AWS spells it
		return fmt.Errorf("Effect %q is not Allow or Deny", s.Effect)
	case (len(s.Action) == 0) == (len(s.NotAction) == 0):
		return errors.New("want exactly one of Action and NotAction")
	case (len(s.Resource) == 0) == (len(s.NotResource) == 0):
		return errors.New("want exactly one of Resource and NotResource")
	case len(s.Condition) > 0 && string(s.Condition) != "null" && string(s.Condition) != "{}":
		return errors.New("has a Condition, which Sluice does not evaluate")
	}
	return nil
}

// applies reports whether s covers invoking arn.
func (s *Statement) applies(arn string) bool {
	action := anyMatch(s.Action, InvokeAction, true)
	if len(s.NotAction) > 0 {
		action = !anyMatch(s.NotAction, InvokeAction, true)
	}
	resource := anyMatch(s.Resource, arn, false)
	if len(s.NotResource) > 0 {
		resource = !anyMatch(s.NotResource, arn, false)
	}
	return action && resource
}

// Allows reports whether p allows invoking arn (a methodArn or routeArn),
// the way API Gateway evaluates an authorizer's policy: a statement
// covering it with Effect Deny wins, else one with Allow allows, else the
// request is denied. A statement covers arn when its Action matches
// execute-api:Invoke (or its NotAction does not) and its Resource matches
// arn (or its NotResource does not). Actions match case-insensitively,
// resources case-sensitively; both take the IAM wildcards * (any run of
// characters) and ? (one character). It returns an error, and false,
// when a statement is one Sluice cannot evaluate: an Effect other than
// Allow or Deny, not exactly one of Action/NotAction or Resource/
// NotResource, or a Condition.
func (p *Policy) Allows(arn string) (bool, error) {
	for i := range p.Statement {
		if err := p.Statement[i].check(); err != nil {
			return false, fmt.Errorf("policy statement %d: %w", i+1, err)
		}
	}
	allowed := false
	for i := range p.Statement {
		s := &p.Statement[i]
		if !s.applies(arn) {
			continue
		}
		if strings.EqualFold(s.Effect, "Deny") {
			return false, nil
		}
		allowed = true
	}
	return allowed, nil
}

// policyOf is the Policy of an answer in aws-lambda-go's types (an
// in-process authorizer's, the authorizer's own).
func policyOf(p events.APIGatewayCustomAuthorizerPolicy) Policy {
	out := Policy{Version: p.Version, Statement: make(Statements, len(p.Statement))}
	for i, s := range p.Statement {
		out.Statement[i] = Statement{Effect: s.Effect, Action: s.Action, Resource: s.Resource}
	}
	return out
}

// Evaluate reports whether policy allows invoking methodARN, as
// Policy.Allows does; a policy it cannot evaluate does not allow. The
// local gateway uses it to act on the authorizer's answer as API Gateway
// would.
func Evaluate(policy events.APIGatewayCustomAuthorizerPolicy, methodARN string) bool {
	p := policyOf(policy)
	ok, _ := p.Allows(methodARN)
	return ok
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
