// The stack's outputs.

package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// newOutputs writes the stack's outputs: the APIs, the authorizer, the alarm
// topic, and what a function of another app needs to share this
// deployment's Redis, database and subject hash key (the sluice.Output*
// names, which sluice.ReadOutputs reads), the rules public key a
// limiter sharing its Redis verifies the rules with, and g's ledger, key
// and Regions in a family of Regions (g not nil).
func newOutputs(stack awscdk.Stack, s *Stack, net *network, rd redis, db database, subjectKey awssecretsmanager.ISecret, rulesPub *string,
	g *Global) {
	join := func(l *[]*string) *string { return awscdk.Fn_Join(jsii.String(","), l) }
	output(stack, "AdminApiUrl", s.AdminAPI.Url(), "Admin REST API (IAM-signed requests)")
	if s.DemoAPI != nil {
		output(stack, "DemoApiUrl", s.DemoAPI.Url(), "Demo REST API behind the Sluice authorizer")
	}
	output(stack, "AuthorizerArn", s.Authorizer.Function.FunctionArn(), "Sluice authorizer Lambda ARN")
	if s.AlarmTopic != nil {
		output(stack, "AlarmTopicArn", s.AlarmTopic.TopicArn(), "SNS topic every alarm notifies: subscribe to it")
	}
	if net.vpc != nil {
		selected := net.vpc.SelectSubnets(net.subnets)
		var groups []*string
		for _, g := range net.groups {
			groups = append(groups, g.SecurityGroupId())
		}
		output(stack, sluice.OutputVpcID, net.vpc.VpcId(), "VPC of the Lambdas, Redis and the database proxy")
		output(stack, sluice.OutputAvailabilityZones, join(selected.AvailabilityZones), "Availability zones of the subnets below")
		output(stack, sluice.OutputSubnetIDs, join(selected.SubnetIds), "Subnets of the Lambdas: a function here reaches Redis, the database proxy and Secrets Manager")
		output(stack, sluice.OutputSecurityGroupIDs, join(&groups), "Security groups of the Lambdas, which Redis and the database proxy admit")
	}
	output(stack, sluice.OutputRedisURL, jsii.String(rd.url), "REDIS_URL")
	output(stack, sluice.OutputRedisMode, jsii.String(rd.mode), "REDIS_MODE")
	if rd.authSecret != nil {
		output(stack, sluice.OutputRedisAuthSecretArn, rd.authSecret.SecretArn(), "REDIS_AUTH_SECRET_ARN: the Redis AUTH token")
	}
	output(stack, sluice.OutputSubjectKeySecretArn, subjectKey.SecretArn(), "SUBJECT_HMAC_KEY_SECRET_ARN: the subject hash key, which names the buckets")
	output(stack, rulesPublicKey, rulesPub, "RULES_PUBLIC_KEY: the rule writers' public key, which a limiter sharing this Redis verifies the rules with")
	// The read-only role's login: a function of another app that shares
	// this deployment reads rules and never writes them (the owner's
	// login stays with the migration and the rule writes).
	if v, ok := db.readerEnv["DB_SECRET_ARN"]; ok {
		output(stack, sluice.OutputDatabaseSecretArn, jsii.String(v), "DB_SECRET_ARN: the rules database's read-only login")
	}
	if v, ok := db.env["DB_HOST"]; ok {
		output(stack, sluice.OutputDatabaseHost, jsii.String(v), "DB_HOST: the RDS Proxy endpoint the Lambdas connect to")
	}
	if g != nil {
		// sluice verify reads it: a family's stack must move the ledger.
		output(stack, "LedgerTable", jsii.String(g.ledgerTable()), "The ledger of global budgets (a DynamoDB global table)")
		// And these, to check each Region's replica of the key: Secrets
		// Manager's failed replica is a successful deploy to CloudFormation.
		output(stack, "SubjectKeyName", jsii.String(g.subjectKeyName()), "The subject hash key's secret, replicated from the first Region")
		output(stack, "GlobalRegions", jsii.String(strings.Join(g.Regions, ",")), "The family's Regions; the first holds the primary key")
	}
}

// output adds the stack output key, value, described by desc.
func output(stack awscdk.Stack, key string, value *string, desc string) {
	awscdk.NewCfnOutput(stack, jsii.String(key), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
}
