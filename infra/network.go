package main

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// network is where the Lambdas run and how they reach what they call.
type network struct {
	vpc     awsec2.IVpc // nil: outside any VPC (NoVpc)
	subnets *awsec2.SubnetSelection
	groups  []awsec2.ISecurityGroup
	// dbOnly are the groups of the functions that reach the database
	// alone (the rule and plan reads): one of their own, which
	// Redis does not admit, when groups are the stack's; groups otherwise.
	dbOnly []awsec2.ISecurityGroup
	// created says the VPC is the stack's own.
	created bool
	// lookupPending says the VPC lookup has no answer in the context yet:
	// the VPC is CDK's placeholder, which the CLI replaces by running the
	// app again once it has done the lookup.
	lookupPending bool
	// needs are what the migration's Delete needs until it has run: the
	// interface endpoints created here, through which a cold start reads
	// the database secret.
	needs []constructs.IDependable
}

// awsService is an AWS API the Lambdas call, with the interface endpoint
// that serves it in a VPC without NAT.
type awsService struct {
	id      string
	service awsec2.InterfaceVpcEndpointAwsService
}

// services are the AWS APIs the Lambdas in the VPC call: Secrets Manager
// (every secret: the subject hash key, Redis's AUTH token, the database's
// credentials) and, with an upstream authorizer, Lambda (its Invoke). Their
// logs and EMF metrics need none: the Lambda service ships them. GET /stats
// (CloudWatch) runs outside the VPC.
func services(p *StackProps) []awsService {
	s := []awsService{{"SecretsManagerEndpoint", awsec2.InterfaceVpcEndpointAwsService_SECRETS_MANAGER()}}
	if p.UpstreamAuthorizerArn != "" {
		s = append(s, awsService{"LambdaEndpoint", awsec2.InterfaceVpcEndpointAwsService_LAMBDA()})
	}
	return s
}

// dummyVpcID is the id of the placeholder VPC that Vpc.fromLookup returns
// while its context has no answer (aws-cdk-lib aws-ec2/lib/vpc.js,
// DUMMY_VPC_PROPS): the CLI runs the app, reads the missing context from
// the cloud assembly, looks it up and runs the app again, but only when
// the first run exits 0.
const dummyVpcID = "vpc-12345"

// newNetwork creates or looks up the VPC, chooses the Lambdas' subnets and
// security groups, and gives those subnets a route to every AWS API the
// Lambdas call (and to the JWKS, with a JWT issuer), or says what is
// missing.
func newNetwork(stack awscdk.Stack, p *StackProps) (*network, error) {
	if p.NoVpc {
		return &network{}, nil
	}
	n := &network{vpc: p.Vpc, subnets: p.VpcSubnets}
	if n.vpc == nil && p.VpcID != "" {
		n.vpc = awsec2.Vpc_FromLookup(stack, jsii.String("Vpc"), &awsec2.VpcLookupOptions{VpcId: jsii.String(p.VpcID)})
		n.lookupPending = *n.vpc.VpcId() == dummyVpcID
	}
	switch {
	case n.vpc == nil:
		n.vpc, n.created = newVpc(stack, p.NatGateways), true
		n.subnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED}
		if p.NatGateways > 0 {
			n.subnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
		}
	case n.subnets == nil && len(*n.vpc.PrivateSubnets()) > 0:
		n.subnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
	case n.subnets == nil:
		n.subnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED}
	}

	n.groups = append(n.groups, p.SecurityGroups...)
	for i, id := range p.SecurityGroupIDs {
		n.groups = append(n.groups, awsec2.SecurityGroup_FromSecurityGroupId(stack, jsii.String(fmt.Sprintf("FunctionsSg%d", i)), jsii.String(id), nil))
	}
	if len(n.groups) == 0 {
		// All outbound: the Lambdas dial Redis, the proxy, the endpoints
		// and (through a NAT) the JWKS; what may answer is up to the
		// ingress rules of each.
		n.groups = []awsec2.ISecurityGroup{awsec2.NewSecurityGroup(stack, jsii.String("FunctionsSg"), &awsec2.SecurityGroupProps{
			Vpc:              n.vpc,
			Description:      jsii.String("Sluice Lambdas"),
			AllowAllOutbound: jsii.Bool(true),
		})}
		n.dbOnly = []awsec2.ISecurityGroup{awsec2.NewSecurityGroup(stack, jsii.String("DatabaseOnlySg"), &awsec2.SecurityGroupProps{
			Vpc:              n.vpc,
			Description:      jsii.String("Sluice Lambdas that reach the database alone"),
			AllowAllOutbound: jsii.Bool(true),
		})}
	}
	if n.dbOnly == nil {
		n.dbOnly = n.groups
	}

	// Isolated subnets reach AWS APIs through interface endpoints only.
	isolated := n.subnets.SubnetType == awsec2.SubnetType_PRIVATE_ISOLATED
	var endpoints bool
	switch {
	case n.created:
		// Secrets Manager always: the migration's Delete must not depend
		// on a NAT gateway CloudFormation may delete first.
		endpoints = true
	case isolated && p.VpcEndpoints == "":
		return nil, fmt.Errorf("VPC %s: the Lambdas' subnets are isolated (no NAT route), and the Lambdas call %s: "+
			"pass -c vpcEndpoints=create to create interface endpoints for them in that VPC, or -c vpcEndpoints=existing "+
			"if it has them (with private DNS)", p.VpcID, serviceNames(p))
	case isolated:
		endpoints = p.VpcEndpoints == "create"
	}
	if isolated && p.JWTIssuer != "" {
		return nil, fmt.Errorf("JWTIssuer: the authorizer fetches the JWKS (%s) over HTTPS, and the Lambdas' subnets in VPC %s "+
			"are isolated: give a VPC whose private subnets have a NAT route", jwksURL(p), p.VpcID)
	}
	if endpoints {
		for _, svc := range services(p) {
			if n.created && p.NatGateways > 0 && svc.id != "SecretsManagerEndpoint" {
				continue // the NAT gateway routes it
			}
			at := n.subnets
			if p.small() && n.created {
				// One AZ: an interface endpoint bills per AZ-hour (7.30 USD
				// a month each), and the Lambdas of the other AZ reach
				// this one's address all the same. Losing that AZ stops
				// cold starts from reading their secrets (warm ones hold
				// them): the small profile's trade.
				at = &awsec2.SubnetSelection{SubnetType: n.subnets.SubnetType, AvailabilityZones: &[]*string{(*n.vpc.AvailabilityZones())[0]}}
			}
			n.needs = append(n.needs, newEndpoint(n.vpc, at, svc))
		}
	}
	if p.Global != nil && (n.created || endpoints) {
		// The ledger of global budgets: a gateway endpoint, free, routed
		// from the route tables of the Lambdas' subnets (with a NAT
		// gateway too: it saves the NAT's per-GB charge).
		n.vpc.AddGatewayEndpoint(jsii.String("DynamoDbEndpoint"), &awsec2.GatewayVpcEndpointOptions{
			Service: awsec2.GatewayVpcEndpointAwsService_DYNAMODB(),
			Subnets: &[]*awsec2.SubnetSelection{n.subnets},
		})
	}
	return n, nil
}

// serviceNames lists the AWS APIs the Lambdas call, for messages.
func serviceNames(p *StackProps) string {
	s := "Secrets Manager"
	if p.UpstreamAuthorizerArn != "" {
		s += " and Lambda (the upstream authorizer)"
	}
	if p.Global != nil {
		s += " and DynamoDB (the ledger, through a gateway endpoint)"
	}
	return s
}

// newEndpoint adds an interface endpoint for svc to vpc, in subnets, with
// private DNS so the SDK's default host name resolves to it. Its security
// group admits 443 from the VPC's CIDR block.
func newEndpoint(vpc awsec2.IVpc, subnets *awsec2.SubnetSelection, svc awsService) awsec2.InterfaceVpcEndpoint {
	endpoint := vpc.AddInterfaceEndpoint(jsii.String(svc.id), &awsec2.InterfaceVpcEndpointOptions{
		Service:           svc.service,
		PrivateDnsEnabled: jsii.Bool(true),
		Subnets:           subnets,
	})
	suppress(endpoint, "CdkNagValidationFailure", "the endpoint's group admits 443 from the VPC's own CIDR block, "+
		"a Fn::GetAtt that AwsSolutions-EC23 cannot resolve; it is not open to the internet",
		"/^AwsSolutions-EC23$/")
	return endpoint
}

// newVpc creates a VPC over 2 AZs. Without NAT gateways it has isolated
// subnets only, no internet gateway; with them, public subnets for the NAT
// gateways and private subnets routed through them. The default security
// group is stripped of its rules (Security Hub EC2.2): nothing uses it.
func newVpc(stack awscdk.Stack, natGateways int) awsec2.Vpc {
	subnets := []*awsec2.SubnetConfiguration{{
		Name:       jsii.String("isolated"),
		SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED,
		CidrMask:   jsii.Number(24),
	}}
	if natGateways > 0 {
		subnets = []*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String("private"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(24)},
		}
	}
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:                       jsii.Number(2),
		NatGateways:                  jsii.Number(float64(natGateways)),
		SubnetConfiguration:          &subnets,
		RestrictDefaultSecurityGroup: jsii.Bool(true),
	})
	// Rejected connections only: that is where a missing security group
	// rule shows (a Lambda dialing a port Redis does not admit), and all
	// traffic would log every Redis round trip of every decision.
	vpc.AddFlowLog(jsii.String("RejectedFlows"), &awsec2.FlowLogOptions{
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(awslogs.NewLogGroup(stack, jsii.String("VpcRejectedFlows"), &awslogs.LogGroupProps{
			Retention:     awslogs.RetentionDays_ONE_MONTH,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		}), nil),
	})
	return vpc
}
