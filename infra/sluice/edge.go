package sluice

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudfront"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/cdn"
)

// EdgeFunctionProps configure NewEdgeFunction.
type EdgeFunctionProps struct {
	// API is the id of the REST API the edge answers for (a token is
	// fine): entries the authorizer made for another API pass. Required.
	API *string
	// SubjectSources and RateLimitHeaders are the authorizer's
	// SUBJECT_SOURCES and RATELIMIT_HEADERS, so that the function reads
	// the subject and answers the 429 as it does. Default theirs.
	SubjectSources, RateLimitHeaders string
	// EdgeKey is the secret of the key subjects are hashed with at the
	// edge (EDGE_KEY_SECRET_ARN: give it to the authorizer and the admin
	// functions). Default: one created, as NewSubjectKey creates its.
	EdgeKey awssecretsmanager.ISecret
}

// EdgeFunction is the CDN edge (docs/edge.md): a CloudFront
// KeyValueStore of long denials and the viewer-request function reading
// it. Associate Function with the behavior in front of the API
// (FunctionEventType_VIEWER_REQUEST), give the publisher GrantPublish.
type EdgeFunction struct {
	Store    awscloudfront.KeyValueStore
	Function awscloudfront.Function
	Key      awssecretsmanager.ISecret
}

// NewEdgeFunction creates the store and the function, whose code
// internal/cdn generates at synth: it panics, as CDK's constructs do, on
// props it cannot synthesize or code over CloudFront's 10 KB with every
// value at its deployed length. The edge key reaches the code as a
// dynamic reference CloudFormation resolves at deploy, so the template
// does not hold it.
func NewEdgeFunction(scope constructs.Construct, id string, p *EdgeFunctionProps) *EdgeFunction {
	if p == nil || p.API == nil {
		panic("sluice.NewEdgeFunction: EdgeFunctionProps.API is required")
	}
	// The settings first, before anything is created.
	if _, err := cdn.FunctionFor("s", "k", "a", p.SubjectSources, p.RateLimitHeaders); err != nil {
		panic(fmt.Sprintf("sluice.NewEdgeFunction: %v", err))
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	e := &EdgeFunction{Key: p.EdgeKey}
	if e.Key == nil {
		e.Key = awssecretsmanager.NewSecret(c, jsii.String("Key"), randomKey("Sluice edge key (HMAC-SHA256): the CDN edge's store keys reveal no subject"))
	}
	e.Store = awscloudfront.NewKeyValueStore(c, jsii.String("Store"), &awscloudfront.KeyValueStoreProps{
		Comment: jsii.String("Sluice: subjects denied for a minute or more, by edge key"),
	})
	code, err := cdn.FunctionFor(*e.Store.KeyValueStoreId(), *e.Key.SecretValue().UnsafeUnwrap(), *p.API, p.SubjectSources, p.RateLimitHeaders)
	if err != nil {
		panic(fmt.Sprintf("sluice.NewEdgeFunction: %v", err))
	}
	e.Function = awscloudfront.NewFunction(c, jsii.String("Function"), &awscloudfront.FunctionProps{
		Code:          awscloudfront.FunctionCode_FromInline(jsii.String(code)),
		Runtime:       awscloudfront.FunctionRuntime_JS_2_0(),
		KeyValueStore: e.Store,
		Comment:       jsii.String("Sluice: answers a long-denied subject's 429 at the edge"),
	})
	return e
}

// GrantPublish lets grantee, the edge publisher, read the store's ETag
// and update its keys: the two calls cdn/kvs makes, on this store alone.
func (e *EdgeFunction) GrantPublish(grantee awsiam.IGrantable) awsiam.Grant {
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee:      grantee,
		Actions:      jsii.Strings("cloudfront-keyvaluestore:DescribeKeyValueStore", "cloudfront-keyvaluestore:UpdateKeys"),
		ResourceArns: jsii.Strings(*e.Store.KeyValueStoreArn()),
	})
}
