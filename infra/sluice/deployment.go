package sluice

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/internal/envvar"
)

// The reference stack's outputs (infra/, `cdk deploy --outputs-file`) that
// a function of another app needs to share its Redis, database and subject
// hash key: [ReadOutputs] reads them into [DeploymentAttributes]. Lists are
// comma-separated.
const (
	OutputVpcID               = "VpcId"
	OutputAvailabilityZones   = "AvailabilityZones"
	OutputSubnetIDs           = "SubnetIds"
	OutputSecurityGroupIDs    = "FunctionSecurityGroupIds"
	OutputRedisURL            = "RedisUrl"
	OutputRedisMode           = "RedisMode"
	OutputRedisAuthSecretArn  = "RedisAuthSecretArn"
	OutputSubjectKeySecretArn = "SubjectKeySecretArn"
	OutputDatabaseSecretArn   = "DatabaseSecretArn"
	OutputDatabaseHost        = "DatabaseHost"
)

// DeploymentAttributes name the shared parts of a Sluice deployment: what
// a function needs to decide against the same buckets and rules as the
// deployment's own authorizer and admin API. The reference stack outputs
// each of them (the Output* names).
type DeploymentAttributes struct {
	// VpcID is the VPC the deployment's Lambdas run in, where Redis and
	// the database proxy are reachable. Empty: no VPC (a Redis and
	// database reachable from anywhere, such as LocalStack's).
	VpcID string
	// AvailabilityZones of the VPC. Required with VpcID.
	AvailabilityZones []string
	// SubnetIDs are the subnets the deployment's Lambdas run in, with
	// their routes to Secrets Manager. Required with VpcID.
	SubnetIDs []string
	// SecurityGroupIDs are the Lambdas' security groups, the ones Redis
	// and the database proxy admit. Required with VpcID.
	SecurityGroupIDs []string
	// RedisURL is REDIS_URL. Required.
	RedisURL string
	// RedisMode is REDIS_MODE: single, cluster or sentinel. Default:
	// single.
	RedisMode string
	// RedisAuthSecretArn is REDIS_AUTH_SECRET_ARN, the AUTH token's
	// secret. Default: none.
	RedisAuthSecretArn string
	// SubjectKeySecretArn is SUBJECT_HMAC_KEY_SECRET_ARN, the subject hash
	// key's secret: without the same key, a function names other buckets
	// than the admin API resets and reports. Default: none.
	SubjectKeySecretArn string
	// DatabaseSecretArn is DB_SECRET_ARN, the rules database's RDS-style
	// secret. Required.
	DatabaseSecretArn string
	// DatabaseHost is DB_HOST, the host to connect to instead of the
	// secret's (the RDS Proxy). Default: the secret's host.
	DatabaseHost string
}

// ReadOutputs reads the outputs of stack from a file written by `cdk
// deploy --outputs-file` (JSON: stack name → output key → value).
func ReadOutputs(path, stack string) (*DeploymentAttributes, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sluice outputs: %w", err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("sluice outputs %s: %w", path, err)
	}
	out, ok := all[stack]
	if !ok {
		return nil, fmt.Errorf("sluice outputs %s: no stack %q", path, stack)
	}
	list := func(k string) []string { return envvar.List(out[k]) }
	a := &DeploymentAttributes{
		VpcID:               out[OutputVpcID],
		AvailabilityZones:   list(OutputAvailabilityZones),
		SubnetIDs:           list(OutputSubnetIDs),
		SecurityGroupIDs:    list(OutputSecurityGroupIDs),
		RedisURL:            out[OutputRedisURL],
		RedisMode:           out[OutputRedisMode],
		RedisAuthSecretArn:  out[OutputRedisAuthSecretArn],
		SubjectKeySecretArn: out[OutputSubjectKeySecretArn],
		DatabaseSecretArn:   out[OutputDatabaseSecretArn],
		DatabaseHost:        out[OutputDatabaseHost],
	}
	if err := a.validate(); err != nil {
		return nil, fmt.Errorf("sluice outputs %s, stack %s: %w", path, stack, err)
	}
	return a, nil
}

func (a *DeploymentAttributes) validate() error {
	var errs []error
	if a.RedisURL == "" {
		errs = append(errs, errors.New(OutputRedisURL+" is required"))
	}
	if a.DatabaseSecretArn == "" {
		errs = append(errs, errors.New(OutputDatabaseSecretArn+" is required"))
	}
	if a.VpcID != "" && (len(a.SubnetIDs) == 0 || len(a.SecurityGroupIDs) == 0 || len(a.AvailabilityZones) == 0) {
		errs = append(errs, fmt.Errorf("%s %s needs %s, %s and %s: a function outside the deployment's subnets "+
			"and security groups cannot reach its Redis", OutputVpcID, a.VpcID, OutputSubnetIDs, OutputSecurityGroupIDs, OutputAvailabilityZones))
	}
	return errors.Join(errs...)
}

// Deployment is a Sluice deployment imported into another app: the VPC,
// subnets and security groups that reach its Redis and database, and its
// secrets. Give it to [AuthorizerProps].Deployment, or apply it to any
// function with [Deployment.Apply] and [Deployment.GrantRead].
type Deployment struct {
	attrs   DeploymentAttributes
	vpc     awsec2.IVpc
	subnets *awsec2.SubnetSelection
	groups  []awsec2.ISecurityGroup
	secrets []awssecretsmanager.ISecret
}

// ImportDeployment imports the deployment a names into scope. Like CDK's
// own constructs it panics on attributes it cannot use, naming what is
// missing.
func ImportDeployment(scope constructs.Construct, id string, a *DeploymentAttributes) *Deployment {
	if a == nil {
		panic("sluice.ImportDeployment " + id + ": attributes are required")
	}
	if err := a.validate(); err != nil {
		panic(fmt.Sprintf("sluice.ImportDeployment %s: %v", id, err))
	}
	c := constructs.NewConstruct(scope, jsii.String(id))
	d := &Deployment{attrs: *a}
	if a.VpcID != "" {
		d.vpc = awsec2.Vpc_FromVpcAttributes(c, jsii.String("Vpc"), &awsec2.VpcAttributes{
			VpcId:             jsii.String(a.VpcID),
			AvailabilityZones: jsii.Strings(a.AvailabilityZones...),
		})
		var subnets []awsec2.ISubnet
		for i, s := range a.SubnetIDs {
			subnets = append(subnets, awsec2.Subnet_FromSubnetId(c, jsii.String(fmt.Sprintf("Subnet%d", i)), jsii.String(s)))
		}
		d.subnets = &awsec2.SubnetSelection{Subnets: &subnets}
		for i, g := range a.SecurityGroupIDs {
			d.groups = append(d.groups, awsec2.SecurityGroup_FromSecurityGroupId(c, jsii.String(fmt.Sprintf("SecurityGroup%d", i)), jsii.String(g), nil))
		}
	}
	for i, arn := range []string{a.RedisAuthSecretArn, a.SubjectKeySecretArn, a.DatabaseSecretArn} {
		if arn != "" {
			d.secrets = append(d.secrets, ImportSecret(c, fmt.Sprintf("Secret%d", i), arn))
		}
	}
	return d
}

// Environment returns the variables that point a Sluice function at the
// deployment: REDIS_URL, REDIS_MODE, REDIS_AUTH_SECRET_ARN,
// SUBJECT_HMAC_KEY_SECRET_ARN, DB_SECRET_ARN and DB_HOST (those set).
func (d *Deployment) Environment() map[string]string {
	env := map[string]string{"REDIS_URL": d.attrs.RedisURL, "DB_SECRET_ARN": d.attrs.DatabaseSecretArn}
	for k, v := range map[string]string{
		"REDIS_MODE":                  d.attrs.RedisMode,
		"REDIS_AUTH_SECRET_ARN":       d.attrs.RedisAuthSecretArn,
		"SUBJECT_HMAC_KEY_SECRET_ARN": d.attrs.SubjectKeySecretArn,
		"DB_HOST":                     d.attrs.DatabaseHost,
	} {
		if v != "" {
			env[k] = v
		}
	}
	return env
}

// Apply puts the function of p in the deployment's VPC, subnets and
// security groups (unless p names a Vpc of its own) and adds the
// deployment's Environment to p's, whose own values win.
func (d *Deployment) Apply(p *FunctionProps) {
	if p.Vpc == nil && d.vpc != nil {
		p.Vpc, p.VpcSubnets = d.vpc, d.subnets
		p.SecurityGroups = append([]awsec2.ISecurityGroup(nil), d.groups...)
	}
	env := d.Environment()
	maps.Copy(env, p.Environment)
	p.Environment = env
}

// GrantRead lets g read the deployment's secrets (the Redis AUTH token,
// the subject hash key and the database's).
func (d *Deployment) GrantRead(g awsiam.IGrantable) {
	for _, s := range d.secrets {
		s.GrantRead(g, nil)
	}
}

// secretSuffix is the hyphen and 6 random letters or digits Secrets
// Manager appends to the name in a secret's complete ARN.
var secretSuffix = regexp.MustCompile(`:secret:.*-[A-Za-z0-9]{6}$`)

// ImportSecret imports an existing secret by its ARN. A complete ARN (the
// name plus Secrets Manager's 6-character suffix) is granted as it is. A
// partial ARN (the name alone) must be imported as partial: CDK then grants
// on <arn>-?????? to match the suffix, where a grant on the partial ARN itself
// would match no secret and every read would be denied. The suffix cannot be
// told from a name that ends the same way (a secret named "db-prod01"): give
// such a secret's complete ARN.
func ImportSecret(scope constructs.Construct, id, arn string) awssecretsmanager.ISecret {
	if secretSuffix.MatchString(arn) {
		return awssecretsmanager.Secret_FromSecretCompleteArn(scope, jsii.String(id), jsii.String(arn))
	}
	return awssecretsmanager.Secret_FromSecretPartialArn(scope, jsii.String(id), jsii.String(arn))
}

// Vpc is the deployment's VPC, nil when it has none.
func (d *Deployment) Vpc() awsec2.IVpc { return d.vpc }

// Subnets selects the deployment's subnets, nil without a VPC.
func (d *Deployment) Subnets() *awsec2.SubnetSelection { return d.subnets }

// SecurityGroups are the groups the deployment's Redis and database proxy
// admit.
func (d *Deployment) SecurityGroups() []awsec2.ISecurityGroup {
	return append([]awsec2.ISecurityGroup(nil), d.groups...)
}
