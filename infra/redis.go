// Redis: the bring-your-own URL, or ElastiCache (a replication group, or
// Serverless in the small profile) with its login and the metrics alarmed on.

package main

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// redis is what the Lambdas need to reach Redis and what the alarms watch.
type redis struct {
	url, mode  string
	authSecret awssecretsmanager.ISecret
	cpu, mem   awscloudwatch.IMetric // nil when not ours to watch
}

// newRedis returns the bring-your-own Redis, or creates ElastiCache.
func newRedis(stack awscdk.Stack, p *StackProps, vpc awsec2.IVpc, subnets *awsec2.SubnetSelection, fnSGs []awsec2.ISecurityGroup) redis {
	if p.RedisURL != "" {
		r := redis{url: p.RedisURL, mode: cmp.Or(p.RedisMode, "single")}
		if p.RedisAuthSecretArn != "" {
			r.authSecret = sluice.ImportSecret(stack, "RedisAuth", p.RedisAuthSecretArn)
		}
		return r
	}
	sg := awsec2.NewSecurityGroup(stack, jsii.String("RedisSg"), &awsec2.SecurityGroupProps{
		Vpc: vpc, Description: jsii.String("Sluice Redis"), AllowAllOutbound: jsii.Bool(false),
	})
	// ElastiCache Serverless also serves reads from replicas on 6380 and
	// advertises both ports in its cluster topology, so a cluster client
	// may dial either; a replication group listens on 6379 alone.
	ports := []float64{6379}
	if p.ServerlessRedis {
		ports = append(ports, 6380)
	}
	for _, fnSG := range fnSGs {
		for _, port := range ports {
			sg.AddIngressRule(fnSG, awsec2.Port_Tcp(jsii.Number(port)), jsii.String("Sluice Lambdas"), nil)
		}
	}
	// The L1 constructs take the subnet ids as []interface{}.
	var subnetIDs []interface{}
	for _, id := range *vpc.SelectSubnets(subnets).SubnetIds {
		subnetIDs = append(subnetIDs, id)
	}
	engine := cmp.Or(p.RedisEngine, "valkey")

	if p.ServerlessRedis {
		// ElastiCache Serverless is always TLS, always highly available, and
		// speaks the cluster protocol; the hash-tagged keys keep each
		// subject's buckets in one slot.
		name := resourceName(stack, "cache")
		auth := newCacheUser(stack, engine)
		const maxGB, maxECPU = 10, 100000
		// The major version pinned, as the replication group's version is:
		// unset, each new stack would get whatever ElastiCache's default
		// is that day (it patches minor versions itself).
		major, _, _ := strings.Cut(redisEngineVersion(engine, p.RedisEngineVersion), ".")
		c := awselasticache.NewCfnServerlessCache(stack, jsii.String("Redis"), &awselasticache.CfnServerlessCacheProps{
			Engine:              jsii.String(engine),
			MajorEngineVersion:  jsii.String(major),
			ServerlessCacheName: jsii.String(name),
			Description:         jsii.String("Sluice token buckets"),
			SubnetIds:           &subnetIDs,
			SecurityGroupIds:    &[]interface{}{sg.SecurityGroupId()},
			UserGroupId:         auth.group.Ref(),
			CacheUsageLimits: &awselasticache.CfnServerlessCache_CacheUsageLimitsProperty{
				DataStorage:   &awselasticache.CfnServerlessCache_DataStorageProperty{Unit: jsii.String("GB"), Maximum: jsii.Number(maxGB)},
				EcpuPerSecond: &awselasticache.CfnServerlessCache_ECPUPerSecondProperty{Maximum: jsii.Number(maxECPU)},
			},
		})
		return redis{
			url:        fmt.Sprintf("rediss://%s:%s", *c.AttrEndpointAddress(), *c.AttrEndpointPort()),
			mode:       "cluster",
			authSecret: auth.secret,
			// ECPUs per second over a minute and data stored, against the
			// configured caps.
			cpu: mathExpression(fmt.Sprintf("100 * e / (60 * %d)", maxECPU), "ECPU % of limit",
				map[string]awscloudwatch.IMetric{"e": cacheMetric("ElastiCacheProcessingUnits", "Sum", "clusterId", *c.Ref())}),
			mem: mathExpression(fmt.Sprintf("100 * b / (%d * 1000000000)", maxGB), "Data % of limit",
				map[string]awscloudwatch.IMetric{"b": cacheMetric("BytesUsedForCache", "Maximum", "clusterId", *c.Ref())}),
		}
	}

	subnetGroup := awselasticache.NewCfnSubnetGroup(stack, jsii.String("RedisSubnets"), &awselasticache.CfnSubnetGroupProps{
		Description: jsii.String("Sluice Redis"),
		SubnetIds:   &subnetIDs,
	})
	// The AUTH token, stored as the plain secret string.
	auth := newRandomSecret(stack, "RedisAuthToken", 64, "Sluice Redis AUTH token",
		"Secrets Manager has no rotation for an ElastiCache AUTH token "+
			"(the replication group must ROTATE then SET it while clients switch), and the functions read the "+
			"token once per cold start, so a rotated token would lock warm functions out")
	name := resourceName(stack, "redis")
	rg := awselasticache.NewCfnReplicationGroup(stack, jsii.String("Redis"), &awselasticache.CfnReplicationGroupProps{
		ReplicationGroupId:          jsii.String(name),
		ReplicationGroupDescription: jsii.String("Sluice token buckets"),
		Engine:                      jsii.String(engine),
		EngineVersion:               jsii.String(redisEngineVersion(engine, p.RedisEngineVersion)),
		CacheNodeType:               jsii.String(cmp.Or(p.RedisNodeType, defaultRedisNodeType)),
		NumCacheClusters:            jsii.Number(2), // a primary and a replica in the other AZ
		AutomaticFailoverEnabled:    jsii.Bool(true),
		MultiAzEnabled:              jsii.Bool(true),
		TransitEncryptionEnabled:    jsii.Bool(true),
		AtRestEncryptionEnabled:     jsii.Bool(true),
		AuthToken:                   auth.SecretValue().UnsafeUnwrap(), // a dynamic reference, resolved by CloudFormation
		CacheSubnetGroupName:        subnetGroup.Ref(),
		SecurityGroupIds:            &[]*string{sg.SecurityGroupId()},
		Port:                        jsii.Number(6379),
		PreferredMaintenanceWindow:  jsii.String(cmp.Or(p.MaintenanceWindow, defaultMaintenanceWindow)),
	})
	// Node ids are <group id>-001, -002; the primary may be either after a
	// failover, so watch the worse of the two.
	worst := func(metric, label string) awscloudwatch.IMetric {
		node := func(n string) awscloudwatch.IMetric {
			return cacheMetric(metric, "Maximum", "CacheClusterId", name+"-"+n)
		}
		return mathExpression("MAX([a, b])", label, map[string]awscloudwatch.IMetric{"a": node("001"), "b": node("002")})
	}
	return redis{
		url:        fmt.Sprintf("rediss://%s:%s", *rg.AttrPrimaryEndPointAddress(), *rg.AttrPrimaryEndPointPort()),
		mode:       "single",
		authSecret: auth,
		cpu:        worst("EngineCPUUtilization", "Engine CPU %"),
		mem:        worst("DatabaseMemoryUsagePercentage", "Memory %"),
	}
}

// cacheUser is the access control of a serverless cache: a user group
// whose one user is "default", with a password, and the secret that holds
// its login.
type cacheUser struct {
	group  awselasticache.CfnUserGroup
	secret awssecretsmanager.Secret
}

// newCacheUser gives the serverless cache a user group, so a client
// must AUTH as well as pass the security group. ElastiCache Serverless takes
// no AUTH token, only RBAC (ElastiCache User Guide, "Role-Based Access
// Control"), and a user group must hold a user named default
// (AWS::ElastiCache::UserGroup, UserIds): that user, with full access and a
// password, is the only one, so no connection is unauthenticated. The
// secret is JSON {"username":"default","password":...} (64 alphanumerics),
// which REDIS_AUTH_SECRET_ARN reads as an RBAC login (config.Redis); the
// functions that connect to Redis may read it, no other.
func newCacheUser(stack awscdk.Stack, engine string) cacheUser {
	secret := awssecretsmanager.NewSecret(stack, jsii.String("RedisUserSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("Sluice Redis login (ElastiCache RBAC user default)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			SecretStringTemplate: jsii.String(`{"username":"default"}`),
			GenerateStringKey:    jsii.String("password"),
			PasswordLength:       jsii.Number(64),
			ExcludePunctuation:   jsii.Bool(true),
		},
	})
	suppress(secret, "AwsSolutions-SMG4", "Secrets Manager has no rotation for an ElastiCache user's password, "+
		"and the functions read it once per cold start, so a rotated password would lock warm functions out")
	user := awselasticache.NewCfnUser(stack, jsii.String("RedisUser"), &awselasticache.CfnUserProps{
		UserId:       jsii.String(resourceName(stack, "cache-user")),
		UserName:     jsii.String("default"),
		Engine:       jsii.String(engine),
		AccessString: jsii.String("on ~* +@all"),
		AuthenticationMode: map[string]any{
			"Type":      "password",
			"Passwords": []*string{secret.SecretValueFromJson(jsii.String("password")).UnsafeUnwrap()}, // a dynamic reference
		},
	})
	group := awselasticache.NewCfnUserGroup(stack, jsii.String("RedisUserGroup"), &awselasticache.CfnUserGroupProps{
		UserGroupId: jsii.String(resourceName(stack, "cache-users")),
		Engine:      jsii.String(engine),
		UserIds:     &[]*string{user.Ref()}, // the user id, once the user exists
	})
	return cacheUser{group: group, secret: secret}
}

// defaultRedisNodeType is the replication group's node type: the smallest
// Graviton node that is not burstable (2 vCPUs, 6.38 GiB). See
// StackProps.RedisNodeType.
const defaultRedisNodeType = "cache.m7g.large"

// redisEngineVersion is the replication group's EngineVersion: version, or
// the default of engine, the 7.x line the limiter's tests run on
// (redis-server 7; Valkey 7.2 is the fork of Redis OSS 7.2).
func redisEngineVersion(engine, version string) string {
	if version != "" {
		return version
	}
	if engine == "redis" {
		return "7.1"
	}
	return "7.2"
}

// cacheMetric is an AWS/ElastiCache metric per minute of one cache or
// node: dim (clusterId, CacheClusterId) is id.
func cacheMetric(name, stat, dim, id string) awscloudwatch.IMetric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("AWS/ElastiCache"), MetricName: jsii.String(name),
		DimensionsMap: &map[string]*string{dim: jsii.String(id)}, Statistic: jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

// mathExpression is a per-minute metric math expression over metrics.
func mathExpression(expr, label string, metrics map[string]awscloudwatch.IMetric) awscloudwatch.IMetric {
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(expr), Label: jsii.String(label),
		UsingMetrics: &metrics, Period: awscdk.Duration_Minutes(jsii.Number(1)),
	})
}
