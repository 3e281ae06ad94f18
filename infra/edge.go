// The CDN edge (-c edge=cloudfront, docs/edge.md): a CloudFront
// distribution in front of the demo API, whose viewer-request function
// answers a long-denied subject's 429 from a KeyValueStore the publisher
// fills, and whose origin header the authorizer requires.

package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfrontorigins"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// EdgeCloudFront is the one value of StackProps.Edge (-c edge=cloudfront).
const EdgeCloudFront = "cloudfront"

// edgePublisher is the publisher's function name (functions/).
const edgePublisher = "edge-publisher"

// originVerifyHeader is internal/edge/originVerifyHeader, spelled
// here so the CDK app does not link the authorizer (TestEdgeStack checks
// they agree).
const originVerifyHeader = "X-Origin-Verify"

// edgeSecrets are the edge's two secrets, made before the functions that
// read them: the key subjects are hashed with at the edge, and the value
// the distribution sends in X-Origin-Verify.
type edgeSecrets struct {
	key, origin awssecretsmanager.Secret
}

// newEdgeSecrets creates them, or returns nil without the edge.
func newEdgeSecrets(stack awscdk.Stack, p *StackProps) *edgeSecrets {
	if p.Edge == "" {
		return nil
	}
	return &edgeSecrets{
		key: newRandomSecret(stack, "EdgeKey", 64, "Sluice edge key (HMAC-SHA256): the CDN edge's store keys reveal no subject",
			"the edge key names the store's entries: a rotation would orphan every entry "+
				"(the edge then knows less until the authorizer records them again), so it is rotated by replacing the secret"),
		origin: newRandomSecret(stack, "OriginVerify", 48,
			"Sluice origin verify: the value CloudFront sends in "+originVerifyHeader+", which the authorizer requires",
			"the distribution's origin header is resolved at deploy: a rotation outside "+
				"CloudFormation would leave CloudFront sending the old value and every request 401; rotate by replacing the secret and deploying"),
	}
}

// authorizerSources are the REST authorizer's identity sources with the
// origin header among them: API Gateway answers 401 without invoking the
// authorizer when a request lacks it.
func (e *edgeSecrets) authorizerSources(subjectSources string) []*string {
	if e == nil {
		return nil
	}
	return append(sluice.IdentitySources(subjectSources), awsapigateway.IdentitySource_Header(jsii.String(originVerifyHeader)))
}

// grantDecider gives fn, which records long denials (the authorizer,
// check) or deletes them on a reset or rule change (the admin functions
// on Redis), the edge key; the authorizer (origin) the origin value too.
func (e *edgeSecrets) grantDecider(fn awslambda.Function, origin bool) {
	if e == nil {
		return
	}
	fn.AddEnvironment(jsii.String("EDGE_KEY_SECRET_ARN"), e.key.SecretArn(), nil)
	e.key.GrantRead(fn, nil)
	if origin {
		fn.AddEnvironment(jsii.String("ORIGIN_VERIFY_SECRET_ARN"), e.origin.SecretArn(), nil)
		e.origin.GrantRead(fn, nil)
	}
}

// newEdge puts the distribution in front of api, the demo API: every
// method and header through (not Host: API Gateway routes on its own),
// nothing cached, the origin header added, the function on viewer
// request. The publisher (fp: Redis, its VPC) runs once a minute, one at
// a time, for about a minute of rounds (app.EdgePublisher.Handle). It
// returns the publisher.
func newEdge(stack awscdk.Stack, p *StackProps, e *edgeSecrets, api awsapigateway.RestApi, fp *sluice.FunctionProps) awslambda.Function {
	fn := sluice.NewEdgeFunction(stack, "Edge", &sluice.EdgeFunctionProps{
		API: api.RestApiId(), SubjectSources: p.SubjectSources, RateLimitHeaders: p.RateLimitHeaders, EdgeKey: e.key,
	})
	dist := awscloudfront.NewDistribution(stack, jsii.String("EdgeDistribution"), &awscloudfront.DistributionProps{
		Comment: jsii.String("Sluice: the demo API behind the CDN edge"),
		DefaultBehavior: &awscloudfront.BehaviorOptions{
			Origin: awscloudfrontorigins.NewRestApiOrigin(api, &awscloudfrontorigins.RestApiOriginProps{
				CustomHeaders: &map[string]*string{originVerifyHeader: e.origin.SecretValue().UnsafeUnwrap()},
			}),
			ViewerProtocolPolicy: awscloudfront.ViewerProtocolPolicy_HTTPS_ONLY,
			AllowedMethods:       awscloudfront.AllowedMethods_ALLOW_ALL(),
			CachePolicy:          awscloudfront.CachePolicy_CACHING_DISABLED(),
			OriginRequestPolicy:  awscloudfront.OriginRequestPolicy_ALL_VIEWER_EXCEPT_HOST_HEADER(),
			FunctionAssociations: &[]*awscloudfront.FunctionAssociation{{
				Function: fn.Function, EventType: awscloudfront.FunctionEventType_VIEWER_REQUEST,
			}},
		},
	})
	suppress(dist, "AwsSolutions-CFR1", "the demo API serves every country; a geo restriction is the owner's choice")
	suppress(dist, "AwsSolutions-CFR2", "the edge function is the rate limiter in front of the API; WAF is the owner's choice")
	suppress(dist, "AwsSolutions-CFR3", "every request that passes the edge is in the demo API's access log; "+
		"the edge's own 429s are counted by CloudFront's FunctionInvocations metrics")
	suppress(dist, "AwsSolutions-CFR4", "the default cloudfront.net certificate fixes the viewer TLS policy; "+
		"a custom domain and certificate (the owner's) sets TLSv1.2_2021")
	fp.Environment["EDGE_STORE_ARN"] = *fn.Store.KeyValueStoreArn()
	fp.ReservedConcurrency = 1
	fp.Timeout = awscdk.Duration_Minutes(jsii.Number(1))
	pub := sluice.NewFunction(stack, sluice.LogicalName(edgePublisher), fp)
	fn.GrantPublish(pub)
	awsevents.NewRule(stack, jsii.String("EdgePublishSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Sluice: the edge publisher, once a minute"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(pub, nil)},
	})
	output(stack, "EdgeDomain", dist.DistributionDomainName(), "The CDN edge's distribution in front of the demo API (sluice verify checks it)")
	output(stack, "EdgeStoreArn", fn.Store.KeyValueStoreArn(), "The CDN edge's KeyValueStore")
	return pub
}
