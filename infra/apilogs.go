// The APIs' logs: access logs, execution logs kept a month, and API
// Gateway's account-wide logging role.

package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// accessLogFormat is one JSON line per request in the APIs' access logs: who
// called (the IAM principal on the admin API), what, the answer, and why
// when API Gateway answered itself (errorType: AUTHORIZER_FAILURE,
// THROTTLED, ACCESS_DENIED for a rate-limited request, ...). Every value is
// a quoted string, so the line stays JSON whatever API Gateway substitutes
// (free-text error messages are left out for that reason). Headers are not
// logged: they carry API keys.
const accessLogFormat = `{"requestId":"$context.requestId","time":"$context.requestTime",` +
	`"ip":"$context.identity.sourceIp","user":"$context.identity.userArn",` +
	`"method":"$context.httpMethod","resource":"$context.resourcePath","status":"$context.status",` +
	`"responseLength":"$context.responseLength","latencyMs":"$context.responseLatency",` +
	`"authorizerLatencyMs":"$context.authorizer.latency","integrationLatencyMs":"$context.integration.latency",` +
	`"errorType":"$context.error.responseType"}`

// stageLogging is the deployment stage of an API: access logs (one JSON line
// per request, accessLogFormat) and execution logs of errors in log groups
// kept a month (newExecutionLogs). Execution logging stays at ERROR without
// data tracing: full request logging would write the callers' API keys to
// the log.
func stageLogging(stack awscdk.Stack, id string) *awsapigateway.StageOptions {
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"AccessLogs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	return &awsapigateway.StageOptions{
		AccessLogDestination: awsapigateway.NewLogGroupLogDestination(logs),
		AccessLogFormat:      awsapigateway.AccessLogFormat_Custom(jsii.String(accessLogFormat)),
		LoggingLevel:         awsapigateway.MethodLoggingLevel_ERROR,
		DataTraceEnabled:     jsii.Bool(false),
	}
}

// newExecutionLogs keeps the log group API Gateway writes the execution
// logs of a deployment stage to, group (executionLogGroupName), a month and
// deletes it with the stack: left to API Gateway, it never expires and
// outlives the stack. The stage must depend on it.
//
// It is CDK's LogRetention, a custom resource that creates the group or,
// when it exists, sets its retention. A stack deployed before this was
// managed has the group API Gateway created, which an AWS::Logs::LogGroup of
// the same name would fail to create ("already exists"), and CloudFormation's
// import of existing resources (`cdk deploy --import-existing-resources`)
// adopts only resources with a static name, not one joined from the API's id
// (TestExecutionLogsUpgrade). A stack deployed when the group was an
// AWS::Logs::LogGroup of this logical id cannot change its type in place:
// one deploy with NoExecutionLogGroups deletes that group, the next adopts
// the one API Gateway makes again (TestExecutionLogsFromLogGroups).
func newExecutionLogs(stack awscdk.Stack, id string, group *string, role awsiam.Role) awslogs.LogRetention {
	lr := awslogs.NewLogRetention(stack, jsii.String(id+"ExecutionLogs"), &awslogs.LogRetentionProps{
		LogGroupName:  group,
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		// Policy updates dropped: CDK would add logs:PutRetentionPolicy
		// on "*"; newExecutionLogsRole grants the groups themselves.
		Role: role.WithoutPolicyUpdates(nil),
	})
	// The function, one per stack, is named so that its role can name its
	// log group, which exists before it.
	fn := stack.Node().FindChild(jsii.String(logRetentionFunctionID)).Node().DefaultChild().(awscdk.CfnResource)
	fn.AddPropertyOverride(jsii.String("FunctionName"), jsii.String(logRetentionFunctionName(stack)))
	fn.Node().AddDependency(stack.Node().FindChild(jsii.String("LogRetentionLogs")))
	return lr
}

// logRetentionFunctionID is the construct id of LogRetention's function,
// one per stack (aws-cdk-lib's aws-logs/lib/log-retention.ts).
const logRetentionFunctionID = "LogRetentionaae0aa3c5b4d4f87b02d85b201efdd8a"

// logRetentionFunctionName is the name of LogRetention's function.
func logRetentionFunctionName(stack awscdk.Stack) string {
	return resourceName(stack, "log-retention")
}

// executionLogGroupName is API-Gateway-Execution-Logs_<api id>/<stage>, the
// log group API Gateway writes api's execution logs to.
func executionLogGroupName(api awsapigateway.RestApi) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("API-Gateway-Execution-Logs_"), api.RestApiId(), jsii.String("/"), jsii.String(stageName),
	})
}

// newExecutionLogsRole is the role of LogRetention's function: it may
// create, expire and delete the execution log groups and its own log group
// (which it expires after a day), and nothing else. Its own group is the
// stack's, so it goes with the stack too.
func newExecutionLogsRole(stack awscdk.Stack, groups []*string) awsiam.Role {
	arns := func(names ...*string) *[]*string {
		var out []*string
		for _, n := range names {
			arn := stack.FormatArn(&awscdk.ArnComponents{
				Service: jsii.String("logs"), Resource: jsii.String("log-group"), ResourceName: n,
				ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
			})
			out = append(out, arn, awscdk.Fn_Join(jsii.String(""), &[]*string{arn, jsii.String(":*")}))
		}
		return &out
	}
	own := jsii.String("/aws/lambda/" + logRetentionFunctionName(stack))
	awslogs.NewLogGroup(stack, jsii.String("LogRetentionLogs"), &awslogs.LogGroupProps{
		LogGroupName:  own,
		Retention:     awslogs.RetentionDays_ONE_DAY,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(stack, jsii.String("LogRetentionRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("CDK LogRetention: the API Gateway execution log groups' retention"),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"LogGroups": awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions:   jsii.Strings("logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:DeleteRetentionPolicy", "logs:DeleteLogGroup"),
					Resources: arns(groups...),
				}),
				awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
					Actions:   jsii.Strings("logs:CreateLogGroup", "logs:PutRetentionPolicy", "logs:CreateLogStream", "logs:PutLogEvents"),
					Resources: arns(own),
				}),
			}}),
		},
	})
	suppress(role, "AwsSolutions-IAM5", "log streams of the execution log groups and of the function's own "+
		"log group (<group ARN>:*), and nothing else", `/^Resource::.*:\*$/`)
	return role
}

// stageName is the deployment stage of both APIs (CDK's default).
const stageName = "prod"

// newAPIGatewayAccount sets the role API Gateway writes logs with, which a
// stage that logs requires. It is one setting per account and region: this
// replaces a role set before (any role with the same AWS managed policy
// serves every API alike), and both the role and the setting are retained
// when the stack is deleted, so the other APIs of the account keep logging.
func newAPIGatewayAccount(stack awscdk.Stack) awsapigateway.CfnAccount {
	role := awsiam.NewRole(stack, jsii.String("ApiGatewayLogsRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("apigateway.amazonaws.com"), nil),
		ManagedPolicies: &[]awsiam.IManagedPolicy{
			awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("service-role/AmazonAPIGatewayPushToCloudWatchLogs")),
		},
	})
	role.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
	suppress(role, "AwsSolutions-IAM4", "AmazonAPIGatewayPushToCloudWatchLogs is the AWS-maintained policy "+
		"for API Gateway's account-wide logging role, which writes to log groups of every API in the account",
		"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs")
	account := awsapigateway.NewCfnAccount(stack, jsii.String("ApiGatewayAccount"), &awsapigateway.CfnAccountProps{
		CloudWatchRoleArn: role.RoleArn(),
	})
	account.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN, nil)
	return account
}
