package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// The stack is checked with cdk-nag's AwsSolutions pack (TestNag, and
// `-c nag=true` at synth). What it reports is fixed in the stack where that
// is reasonable; the rest is suppressed with suppress, beside the resource it
// concerns, with the reason it is acceptable, so each exception is read and
// reviewed with the code that causes it.

// suppress records that rule's findings on c and on the children c has now
// are accepted, for reason: call it once c is complete. appliesTo narrows the
// suppression to the given findings ("Policy::arn:...", "Resource::..."), or
// to those matching a regular expression when written /like this/; empty
// means every finding of rule.
func suppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	cdknag.NagSuppressions_AddResourceSuppressions(c, nagSuppression(rule, reason, appliesTo), jsii.Bool(true))
}

// suppressInStack is suppress for every resource of stack, present or
// added later.
func suppressInStack(stack awscdk.Stack, rule, reason string, appliesTo ...string) {
	cdknag.NagSuppressions_AddStackSuppressions(stack, nagSuppression(rule, reason, appliesTo), nil)
}

func nagSuppression(rule, reason string, appliesTo []string) *[]*cdknag.NagPackSuppression {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		var at []interface{}
		for _, a := range appliesTo {
			if len(a) > 1 && a[0] == '/' && a[len(a)-1] == '/' {
				at = append(at, &cdknag.RegexAppliesTo{Regex: jsii.String(a)})
			} else {
				at = append(at, jsii.String(a))
			}
		}
		s.AppliesTo = &at
	}
	return &[]*cdknag.NagPackSuppression{s}
}
