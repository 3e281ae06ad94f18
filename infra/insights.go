package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/stats/insights"
)

// insightsPrefix starts the names of the stack's Contributor Insights
// rules (unique per account and region, as the stack name is).
func insightsPrefix(stack awscdk.Stack) string { return *stack.StackName() + "-sluice" }

// insightRule is one Contributor Insights rule over the decision log lines
// (internal/authorizer's logDecision: JSON with decision, api,
// ruleId, principalId, and subject when SUBJECT_SHOW shows it).
type insightRule struct {
	id, suffix, title string
	keys              []string
	decisions         []string
	// present are more fields a line must have to be counted.
	present []string
	// noWidget leaves the rule off the dashboard: its keys are subjects
	// as sent, for the admin API's readers (IAM), not every dashboard
	// reader.
	noWidget bool
}

// insightRules are the four rules internal/stats/insights reads, in the
// order of insights.RuleNames. The shown subjects rule keys on "subject",
// which the authorizer writes only for a kind SUBJECT_SHOW opted in and
// never for a credential (header, query, apikey); with SUBJECT_SHOW unset
// it matches no line, so it costs its monthly rule fee alone.
var insightRules = []insightRule{
	{"InsightsDeniedSubjects", insights.SuffixDeniedSubjects, "Top denied subjects (hash, rule, api)",
		[]string{"$.principalId", "$.ruleId", "$.api"}, []string{"deny", "fail-closed"}, nil, false},
	{"InsightsLimitingRules", insights.SuffixLimitingRules, "Top limiting rules (rule, api, decision)",
		[]string{"$.ruleId", "$.api", "$.decision"}, []string{"deny", "fail-closed", "shadow-deny"}, nil, false},
	{"InsightsFailOpenRules", insights.SuffixFailOpenRules, "Top fail-open rules (rule, api)",
		[]string{"$.ruleId", "$.api"}, []string{"fail-open"}, nil, false},
	{"InsightsShownSubjects", insights.SuffixShownSubjects, "Top denied subjects as sent (hash, subject)",
		[]string{"$.principalId", "$.subject"}, []string{"deny", "fail-closed"}, []string{"$.subject"}, true},
}

// newInsights creates the Contributor Insights rules over the decision
// log lines of the functions that decide, a dashboard with a widget per
// rule, and lets the stats function read exactly these rules' reports.
//
// Why log lines and not per-rule metrics: a custom metric per rule (or per
// subject) costs per metric per month whether anything is limited or not;
// the decision lines exist anyway, and Contributor Insights charges per
// rule and per matched line.
func newInsights(stack awscdk.Stack, dashboard bool, readers []awslambda.Function, deciders ...awslambda.Function) {
	var groups []*string
	for _, fn := range deciders {
		groups = append(groups, fn.LogGroup().LogGroupName())
	}
	prefix := insightsPrefix(stack)
	var arns []*string
	var widgets []map[string]any
	for i, r := range insightRules {
		name := prefix + r.suffix
		filters := []map[string]any{{"Match": "$.decision", "In": r.decisions}}
		for _, f := range r.present {
			filters = append(filters, map[string]any{"Match": f, "IsPresent": true})
		}
		body := map[string]any{
			"Schema":        map[string]any{"Name": "CloudWatchLogRule", "Version": 1},
			"LogGroupNames": groups,
			"LogFormat":     "JSON",
			"Contribution": map[string]any{
				"Keys":    r.keys,
				"Filters": filters,
			},
			"AggregateOn": "Count",
		}
		rule := awscloudwatch.NewCfnInsightRule(stack, jsii.String(r.id), &awscloudwatch.CfnInsightRuleProps{
			RuleName:  jsii.String(name),
			RuleState: jsii.String("ENABLED"),
			RuleBody:  stack.ToJsonString(body, nil),
		})
		arns = append(arns, rule.AttrArn())
		if r.noWidget {
			continue
		}
		widgets = append(widgets, map[string]any{
			"type": "metric", "x": 8 * i, "y": 0, "width": 8, "height": 6,
			"properties": map[string]any{
				"title":  r.title,
				"region": stack.Region(),
				"view":   "timeSeries", "stacked": false, "period": 60,
				"insightRule": map[string]any{
					"maxContributorCount": 10, "orderBy": "Sum", "ruleName": rule.AttrRuleName(),
				},
				"legend": map[string]any{"position": "bottom"},
			},
		})
	}
	if dashboard {
		awscloudwatch.NewCfnDashboard(stack, jsii.String("InsightsDashboard"), &awscloudwatch.CfnDashboardProps{
			DashboardName: jsii.String(prefix + "-insights"),
			DashboardBody: stack.ToJsonString(map[string]any{"widgets": widgets}, nil),
		})
	}
	for _, fn := range readers { // GET /stats, POST /subjects/find
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("ReadDecisionInsights"),
			Actions:   jsii.Strings("cloudwatch:GetInsightRuleReport"),
			Resources: &arns,
		}))
	}
}
