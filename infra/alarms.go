// The alarm topic, the alarms and the dashboard.

package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// newMonitoring creates the alarm topic, the alarms and the dashboard.
func newMonitoring(stack awscdk.Stack, p *StackProps, s *Stack, rd redis) {
	var topic awssns.ITopic
	if p.AlarmTopicArn != "" {
		topic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(p.AlarmTopicArn))
	} else {
		t := awssns.NewTopic(stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
			DisplayName: jsii.String("Sluice alarms"),
			EnforceSSL:  jsii.Bool(true),
		})
		suppress(t, "AwsSolutions-SNS2", "CloudWatch alarms cannot publish to a topic encrypted with the AWS managed "+
			"key (aws/sns), and the messages carry alarm names and metric values, no request data")
		topic = t
		s.AlarmTopic = t
	}
	if p.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	} else if p.AlarmTopicArn == "" {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("sluice:alarmTopicWithoutSubscriber"), jsii.String(
			"the alarms notify the topic AlarmTopic, which has no subscriber: pass -c alarmEmail=<address> "+
				"or subscribe to the AlarmTopicArn output"), nil)
	}
	if len(p.ProtectedAPINames) == 0 {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("sluice:noProtectedApi"), jsii.String(
			"no API behind the authorizer is named, so no alarm watches your APIs' 5XX (the authorizer failing, timing out "+
				"or throttled): pass -c protectedApiNames=<ApiName>,... once an API uses the AuthorizerArn output "+
				"(AuthorizerStartFailuresAlarm watches the authorizer's own starts and timeouts meanwhile)"), nil)
	}
	var apis []awsapigateway.IRestApi
	if s.DemoAPI != nil {
		apis = append(apis, s.DemoAPI)
	}
	check := s.Functions["check"]
	s.Alarms = s.Authorizer.NewAlarms(stack, "", &sluice.AlarmsProps{
		Topic: topic, APIs: apis, APINames: p.ProtectedAPINames,
		Deciders: []awslambda.IFunction{check}, P99Millis: p.AuthorizerP99Millis,
	})
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	if rd.cpu != nil {
		for _, a := range []struct {
			id, desc string
			m        awscloudwatch.IMetric
		}{
			{"RedisCpuAlarm", "Sluice Redis CPU is high", rd.cpu},
			{"RedisMemoryAlarm", "Sluice Redis memory is high", rd.mem},
		} {
			al := awscloudwatch.NewAlarm(stack, jsii.String(a.id), &awscloudwatch.AlarmProps{
				AlarmDescription: jsii.String(a.desc), Metric: a.m, Threshold: jsii.Number(80), EvaluationPeriods: jsii.Number(5),
				ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
				TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
			})
			al.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
			al.AddOkAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}

	if p.small() {
		return // no dashboards: 3 USD a month each beyond an account's first three
	}
	authorizer := s.Authorizer.Function
	dash := awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(*stack.StackName() + "-sluice"),
	})
	graph := func(title string, ms ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &ms, Width: jsii.Number(8)})
	}
	sluiceMetric := func(name, stat, outcome string) awscloudwatch.IMetric {
		dm := map[string]*string{"Function": authorizer.FunctionName()}
		if outcome != "" {
			dm["Outcome"] = jsii.String(outcome)
		}
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(sluice.MetricsNamespace), MetricName: jsii.String(name), DimensionsMap: &dm,
			Statistic: jsii.String(stat), Period: minute, Label: jsii.String(strings.TrimSpace(name + " " + outcome + " " + stat)),
		})
	}
	var decisions []awscloudwatch.IMetric
	for _, outcome := range []string{"allow", "deny", "shadowDeny", "unauthorized"} {
		decisions = append(decisions, sluiceMetric("Decisions", "Sum", outcome))
	}
	dash.AddWidgets(
		graph("Authorizer decisions", decisions...),
		graph("Redis latency (ms)", sluiceMetric("RedisLatency", "p50", ""), sluiceMetric("RedisLatency", "p99", "")),
		graph("Deny-cache hits, breaker open", sluiceMetric("DenyCacheHits", "Sum", ""), s.Alarms.BreakerOpenMetric),
	)
	// The authorizer's Errors include every 401 (a REST authorizer answers
	// 401 by failing), so they are graphed, never alarmed on.
	errs := authorizer.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute})
	invocations := []awscloudwatch.IMetric{
		authorizer.MetricInvocations(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute}), errs,
		authorizer.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute}),
	}
	dash.AddWidgets(
		graph("Authorizer invocations, errors (incl. 401), throttles, API 5XX", append(invocations, s.Alarms.ServerErrorMetrics...)...),
		graph("Authorizer duration (ms)",
			authorizer.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p50"), Period: minute}),
			authorizer.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: minute})),
		graph("Fail-open and fail-closed decisions", s.Alarms.FailOpenMetric, s.Alarms.FailClosedMetric),
	)
	if rd.cpu != nil {
		dash.AddWidgets(graph("Redis CPU %", rd.cpu), graph("Redis memory %", rd.mem))
	}
}
