package sluice

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// MetricsNamespace is the CloudWatch namespace of the Embedded Metric
// Format lines the authorizer and check functions write, with dimension
// Function = the Lambda's name.
const MetricsNamespace = "Sluice"

// AlarmsProps configure [Authorizer.NewAlarms].
type AlarmsProps struct {
	// Topic receives every alarm's ALARM and OK notifications: an alarm
	// without an action pages nobody. Required.
	Topic awssns.ITopic
	// APIs whose 5XXError each get an alarm. API Gateway answers 500 when
	// the authorizer fails, times out, is throttled or returns a malformed
	// policy, and counts it per API, per response, with no lag (the
	// authorizer's own Errors count every 401, since a REST authorizer
	// answers 401 by failing). The count includes the API's integration
	// failures. Default: the APIs given to [Authorizer.AddGatewayResponses].
	APIs []awsapigateway.IRestApi
	// APINames are further APIs by name (ApiName), such as those of other
	// stacks that use this authorizer's ARN. Default: none.
	APINames []string
	// Deciders are further functions whose Sluice metrics (FailOpen,
	// FailClosed, BreakerOpen) count with the authorizer's, such as the
	// check function. Default: none.
	Deciders []awslambda.IFunction
	// P99Millis is the authorizer's p99 duration threshold, over 5
	// minutes. Default: 50.
	P99Millis float64
}

// Alarms are the alarms of one Sluice authorizer, each notifying
// AlarmsProps.Topic.
type Alarms struct {
	// FailOpen: a request was allowed without checking Redis.
	FailOpen awscloudwatch.Alarm
	// FailClosed: a request was denied because Redis failed on a
	// failure_mode closed rule.
	FailClosed awscloudwatch.Alarm
	// BreakerOpen: a function's Redis circuit breaker was open.
	BreakerOpen awscloudwatch.Alarm
	// RulesRefused: a decider refused a rules version or snapshot in
	// Redis that the rule writers did not sign (or one from the future):
	// a process holding Redis tried to change the rules.
	RulesRefused awscloudwatch.Alarm
	// Throttles: Lambda throttled the authorizer (a 500 for the caller).
	Throttles awscloudwatch.Alarm
	// P99: the authorizer's p99 duration was above the threshold.
	P99 awscloudwatch.Alarm
	// ServerErrors: one per API, its 5XXError.
	ServerErrors []awscloudwatch.Alarm
	// StartFailures: the authorizer failed to start, or timed out; it
	// needs no API name.
	StartFailures awscloudwatch.Alarm

	// The metrics alarmed on, for dashboards.
	FailOpenMetric, FailClosedMetric, BreakerOpenMetric, RulesRefusedMetric awscloudwatch.IMetric
	ServerErrorMetrics                                                      []awscloudwatch.IMetric
	StartFailuresMetric                                                     awscloudwatch.IMetric
}

// StartFailurePattern matches the lines Lambda writes when a function's
// process exits, its init fails or passes 10 s, or an invocation times
// out, in the function's log format. Text: "Runtime.ExitError", the
// INIT_REPORT line's "Status: timeout", "Task timed out". JSON (a
// function with SystemLogLevel, whose lines are objects): a record whose
// errorType is Runtime.ExitError, whose status is timeout (platform.report,
// platform.runtimeDone), or a platform.initReport whose status is not
// success; a handler's own error (every 401 of a REST authorizer) is none
// of these.
func StartFailurePattern(jsonFormat bool) awslogs.IFilterPattern {
	if jsonFormat {
		return awslogs.FilterPattern_Literal(jsii.String(`{ $.record.errorType = "Runtime.ExitError" || $.record.status = "timeout" || ` +
			`($.type = "platform.initReport" && $.record.status != "success") }`))
	}
	return awslogs.FilterPattern_AnyTerm(jsii.String("Runtime.ExitError"), jsii.String("Status: timeout"), jsii.String("Task timed out"))
}

// NewAlarms creates the authorizer's alarms in scope, with ids starting
// with prefix (unique in scope): <prefix>FailOpenAlarm,
// FailClosedAlarm, BreakerOpenAlarm, RulesRefusedAlarm, AuthorizerThrottlesAlarm,
// AuthorizerP99Alarm, AuthorizerStartFailuresAlarm (with its log metric
// filter AuthorizerStartFailures) and AuthorizerFailuresAlarm (then 2, 3,
// ... for each further API). Each sends ALARM and OK to the topic; missing data is not
// breaching (a function that was not invoked failed nothing).
func (a *Authorizer) NewAlarms(scope constructs.Construct, prefix string, p *AlarmsProps) *Alarms {
	if p == nil || p.Topic == nil {
		panic("sluice.Authorizer.NewAlarms " + prefix + ": Topic is required: an alarm without an action pages nobody")
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	action := awscloudwatchactions.NewSnsAction(p.Topic)
	// alarm fires when datapoints of the last periods minutes are above
	// threshold.
	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold, datapoints, periods float64) awscloudwatch.Alarm {
		al := awscloudwatch.NewAlarm(scope, jsii.String(prefix+id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			DatapointsToAlarm:  jsii.Number(datapoints),
			EvaluationPeriods:  jsii.Number(periods),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		al.AddAlarmAction(action)
		al.AddOkAction(action)
		return al
	}
	deciders := append([]awslambda.IFunction{a.Function}, p.Deciders...)
	// across is expr over one metric per decider ("SUM" or "MAX"), each
	// filled with 0 so that a quiet function does not blank the result.
	across := func(fn, name, stat, label string) awscloudwatch.IMetric {
		using := map[string]awscloudwatch.IMetric{}
		var fills []string
		for i, d := range deciders {
			// Ids unique across the expressions one graph may show.
			k := fmt.Sprintf("%s%s%d", strings.ToLower(name[:1]), name[1:], i)
			using[k] = awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(name),
				DimensionsMap: &map[string]*string{"Function": d.FunctionName()},
				Statistic:     jsii.String(stat), Period: minute,
			})
			fills = append(fills, "FILL("+k+", 0)")
		}
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fn + "([" + strings.Join(fills, ", ") + "])"), Label: jsii.String(label), UsingMetrics: &using, Period: minute,
		})
	}
	al := &Alarms{
		FailOpenMetric:     across("SUM", "FailOpen", "Sum", "Fail-open decisions"),
		FailClosedMetric:   across("SUM", "FailClosed", "Sum", "Fail-closed decisions"),
		BreakerOpenMetric:  across("MAX", "BreakerOpen", "Maximum", "Redis breaker open"),
		RulesRefusedMetric: across("SUM", "RulesRefused", "Sum", "Rules refused (not the writers')"),
	}
	// Fail-open and the breaker page on 3 minutes of any 5: a planned
	// Redis failover (about 30 s in a maintenance window, plus the
	// breaker's 1 s cool-down) fills at most 2 one-minute datapoints
	// wherever it starts, so it never pages, while a Redis that stays
	// down pages within 3 minutes (TestFailoverDoesNotPage). Meanwhile
	// every request is let through, which is what fail-open is for.
	// Fail-closed pages on the first minute: it refuses callers who are
	// within their limits.
	al.FailOpen = alarm("FailOpenAlarm", "Sluice allowed requests without checking Redis (fail-open) in 3 of the last 5 minutes",
		al.FailOpenMetric, 0, 3, 5)
	al.FailClosed = alarm("FailClosedAlarm", "Sluice denied requests because Redis failed on failure_mode closed rules "+
		"(callers got 429 without being over a limit)", al.FailClosedMetric, 0, 1, 1)
	// A refused rules snapshot pages on the first minute: no failure
	// writes one, a process holding Redis does (docs/SECURITY.md).
	al.RulesRefused = alarm("RulesRefusedAlarm", "A Sluice decider refused rules in Redis the rule writers did not sign, "+
		"or a version from the future: a process holding Redis tried to change the rules", al.RulesRefusedMetric, 0, 1, 1)
	al.BreakerOpen = alarm("BreakerOpenAlarm", "Sluice's Redis circuit breaker was open in 3 of the last 5 minutes: decisions "+
		"fall back to each rule's failure mode without asking Redis", al.BreakerOpenMetric, 0, 3, 5)
	// A start that fails (a bad secret, a configuration the function
	// refuses, an init past Lambda's 10 s) or an invocation that times out
	// is a 500 on every API behind the authorizer, whatever their names:
	// counted from the function's own log, where Lambda reports each.
	// (Its Errors metric cannot tell: it counts every 401 too.)
	starts := awslogs.NewMetricFilter(scope, jsii.String(prefix+"AuthorizerStartFailures"), &awslogs.MetricFilterProps{
		LogGroup:        a.Function.LogGroup(),
		FilterPattern:   StartFailurePattern(a.jsonLogs),
		MetricNamespace: jsii.String(MetricsNamespace),
		MetricName:      awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("StartFailures-"), a.Function.FunctionName()}),
		MetricValue:     jsii.String("1"),
	})
	al.StartFailuresMetric = starts.Metric(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute})
	al.StartFailures = alarm("AuthorizerStartFailuresAlarm", "The Sluice authorizer failed to start (configuration, secret, "+
		"init timeout) or timed out: API Gateway answers 500 to requests behind it", al.StartFailuresMetric, 0, 1, 1)
	al.Throttles = alarm("AuthorizerThrottlesAlarm", "Sluice authorizer invocations were throttled (API Gateway answers 500)",
		a.Function.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: minute}), 0, 1, 1)
	al.P99 = alarm("AuthorizerP99Alarm", "Sluice authorizer p99 duration is high",
		a.Function.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: minute}), cmp.Or(p.P99Millis, 50), 5, 5)
	apis := p.APIs
	if apis == nil {
		apis = a.apis
	}
	var names []*string
	for _, api := range apis {
		names = append(names, api.RestApiName())
	}
	names = append(names, *jsii.Strings(p.APINames...)...)
	for i, name := range names {
		m := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/ApiGateway"), MetricName: jsii.String("5XXError"),
			DimensionsMap: &map[string]*string{"ApiName": name},
			Statistic:     jsii.String("Sum"), Period: minute,
		})
		id := "AuthorizerFailuresAlarm"
		if i > 0 {
			id += fmt.Sprint(i + 1)
		}
		al.ServerErrorMetrics = append(al.ServerErrorMetrics, m)
		al.ServerErrors = append(al.ServerErrors, alarm(id, "API Gateway answered 5XX on an API behind the Sluice "+
			"authorizer: the authorizer failed, timed out, was throttled or returned a malformed policy "+
			"(or the API's integration failed)", m, 0, 1, 1))
	}
	return al
}
