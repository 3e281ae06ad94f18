// The rules database: the bring-your-own one, or Aurora PostgreSQL (behind
// an RDS Proxy in production), and the migration that runs on deploy.

package main

import (
	"cmp"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/migrations"
)

// database is what the Lambdas need to reach PostgreSQL.
type database struct {
	// env and secret connect as the owner of the schema: the migrate
	// function and the admin functions that write rules and plans.
	env    map[string]string
	secret awssecretsmanager.ISecret
	// readerEnv and readerSecret connect as the read-only role
	// sluice_reader (migration 00007): every other function. The same as
	// env and secret for a database brought along.
	readerEnv    map[string]string
	readerSecret awssecretsmanager.ISecret
	// dependable is what the migration must wait for (nil for BYO).
	dependable constructs.IConstruct
}

// newDatabase returns the bring-your-own database, or creates Aurora
// PostgreSQL Serverless v2 behind an RDS Proxy.
func newDatabase(stack awscdk.Stack, p *StackProps, vpc awsec2.IVpc, subnets *awsec2.SubnetSelection, fnSGs []awsec2.ISecurityGroup) database {
	switch {
	case p.DatabaseURL != "":
		env := map[string]string{"DATABASE_URL": p.DatabaseURL}
		return database{env: env, readerEnv: env}
	case p.DatabaseSecretArn != "":
		// The read-only role needs a password only this database's owner
		// can set: a database brought along is used with its one secret.
		secret := sluice.ImportSecret(stack, "DbSecret", p.DatabaseSecretArn)
		env := map[string]string{"DB_SECRET_ARN": p.DatabaseSecretArn}
		if p.DatabaseHost != "" {
			env["DB_HOST"] = p.DatabaseHost
		}
		return database{env: env, secret: secret, readerEnv: env, readerSecret: secret}
	}
	// The small profile's cluster scales to 0 ACU, paused after 5 idle
	// minutes (only the admin functions connect, and the authorizers when
	// the Redis snapshot is missing): storage alone is billed then, and
	// the first query after a pause waits about 15 s for it to resume.
	minACU := 0.5
	var pause awscdk.Duration
	if p.small() {
		minACU, pause = 0, awscdk.Duration_Minutes(jsii.Number(5))
	}
	window := cmp.Or(p.MaintenanceWindow, defaultMaintenanceWindow)
	cluster := awsrds.NewDatabaseCluster(stack, jsii.String("Db"), &awsrds.DatabaseClusterProps{
		ServerlessV2AutoPauseDuration: pause,
		Engine: awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
			Version: awsrds.AuroraPostgresEngineVersion_VER_16_9(),
		}),
		Writer: awsrds.ClusterInstance_ServerlessV2(jsii.String("writer"), &awsrds.ServerlessV2ClusterInstanceProps{
			PreferredMaintenanceWindow: jsii.String(window),
		}),
		PreferredMaintenanceWindow: jsii.String(window),
		ServerlessV2MinCapacity:    jsii.Number(minACU),
		ServerlessV2MaxCapacity:    jsii.Number(4),
		Credentials:                awsrds.Credentials_FromGeneratedSecret(jsii.String("sluice"), nil),
		DefaultDatabaseName:        jsii.String("sluice"),
		StorageEncrypted:           jsii.Bool(true),
		Vpc:                        vpc,
		VpcSubnets:                 subnets,
		RemovalPolicy:              awscdk.RemovalPolicy_SNAPSHOT,
		DeletionProtection:         jsii.Bool(p.DatabaseDeletionProtection),
		Backup: &awsrds.BackupProps{
			Retention:       awscdk.Duration_Days(jsii.Number(float64(cmp.Or(p.DatabaseBackupRetentionDays, 7)))),
			PreferredWindow: jsii.String(backupWindow),
		},
	})
	if !p.DatabaseDeletionProtection {
		suppress(cluster, "AwsSolutions-RDS10", "RemovalPolicy SNAPSHOT keeps a final snapshot whenever "+
			"CloudFormation deletes the cluster; deletion protection (DatabaseDeletionProtection, off by default) "+
			"would make `cdk destroy` fail")
	}
	rds6 := "the functions reach the cluster only through the RDS Proxy, which authenticates with the " +
		"Secrets Manager credentials; IAM database authentication would be unused"
	if p.small() {
		rds6 = "the functions connect to the cluster (the small profile has no RDS Proxy) with the Secrets " +
			"Manager credentials they read at a cold start; IAM database authentication would be unused"
	}
	suppress(cluster, "AwsSolutions-RDS6", rds6)
	suppress(cluster, "AwsSolutions-SMG4", "the functions read the database credentials once per cold start "+
		"and keep them, so a rotation would lock warm functions out of the proxy until they restart")
	// The read-only role's login (migration 00007): the migrate function
	// sets the role's password from it, every function that only reads
	// connects with it. Attached to the cluster, it names the host and port.
	readerSecret := awsrds.NewDatabaseSecret(stack, jsii.String("DbReaderSecret"), &awsrds.DatabaseSecretProps{
		Username: jsii.String(readerRole),
		Dbname:   jsii.String("sluice"),
	})
	reader := readerSecret.Attach(cluster)
	suppress(readerSecret, "AwsSolutions-SMG4", "the functions read the read-only role's credentials once per cold start "+
		"and keep them, and the migrate function sets the role's password from this secret at each migration: "+
		"a rotation would lock warm functions out until the next deploy")
	env := map[string]string{"DB_SECRET_ARN": *cluster.Secret().SecretArn()}
	readerEnv := map[string]string{"DB_SECRET_ARN": *reader.SecretArn()}
	// No RDS Proxy in the small profile (8 ACU minimum, 88 USD a month):
	// the functions connect to the cluster, their number bounded by the
	// admin functions' reserved concurrency and the authorizers reading
	// the snapshot first.
	conns := cluster.Connections()
	if !p.small() {
		// Lambdas connect through the proxy: it pools connections across
		// invocations so a burst of cold starts cannot exhaust PostgreSQL.
		proxy := cluster.AddProxy(jsii.String("Proxy"), &awsrds.DatabaseProxyOptions{
			// Unique per account and region, as the stack name is: CDK names
			// the proxy "Proxy" otherwise (without the
			// databaseProxyUniqueResourceName flag), and a second stack there
			// (staging beside prod) fails to create.
			DbProxyName: jsii.String(proxyName(stack)),
			Vpc:         vpc,
			VpcSubnets:  subnets,
			Secrets:     &[]awssecretsmanager.ISecret{cluster.Secret(), reader},
			RequireTLS:  jsii.Bool(true),
		})
		conns = proxy.Connections()
		env["DB_HOST"], readerEnv["DB_HOST"] = *proxy.Endpoint(), *proxy.Endpoint()
	}
	for _, fnSG := range fnSGs {
		conns.AllowFrom(fnSG, awsec2.Port_Tcp(jsii.Number(5432)), jsii.String("Sluice Lambdas"))
	}
	return database{env: env, secret: cluster.Secret(), readerEnv: readerEnv, readerSecret: reader, dependable: cluster}
}

// defaultMaintenanceWindow is MaintenanceWindow's default, and
// backupWindow Aurora's daily backup window (UTC), which it must not
// overlap.
const (
	defaultMaintenanceWindow = "sun:03:00-sun:04:00"
	backupWindow             = "01:00-01:30"
)

// readerRole is the read-only database role migration 00007 creates.
const readerRole = "sluice_reader"

// readsOnly reports whether the database has a read-only login of its own.
func (d database) readsOnly() bool { return d.readerSecret != nil && d.readerSecret != d.secret }

// proxyName is the RDS Proxy's name: letters, digits and single hyphens,
// starting with a letter, at most 60 characters, from the stack name.
func proxyName(stack awscdk.Stack) string {
	name := resourceName(stack, "db-proxy")
	name = regexp.MustCompile(`-{2,}`).ReplaceAllString(name, "-")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "s-" + name
	}
	return name
}

// newMigration runs the migrate function through a custom resource whose
// Migrations property is the digest of the migrations the function carries
// (migrations.Digest): CloudFormation sends Create on the first deploy and
// Update when the migrations change, and an unchanged app shows no change
// in `cdk diff`. (A triggers.Trigger would re-run on every code change.)
// The function (app.Migrator.Handle) migrates on Create and on an Update to
// its own set, and touches no database on Delete, on a rollback (an Update
// back to another set) or on an Update to the same set, so neither deleting
// the stack nor rolling it back waits on PostgreSQL. A cold start still
// reads the database secret before any event is handled (app.NewDecider), so the
// custom resource depends on needs (the interface endpoints):
// CloudFormation deletes in reverse dependency order, and the Delete event
// then runs while the endpoint is still there rather than hanging on
// Secrets Manager until it times out.
//
// limits, when not "", is the stack's limits file (StackProps.Limits),
// the Limits property: the function applies it after migrating, and an
// Update that changes only it applies it without migrating again.
//
// rulesKey's ARN is the RulesSigningKey property: a stack that gains or
// replaces the key sends an Update, which republishes the snapshot signed
// with it. Every event answers the key's public half (GetAtt
// RulesPublicKey).
func newMigration(stack awscdk.Stack, fn awslambda.Function, db database, limits string, rulesKey awssecretsmanager.ISecret,
	needs ...constructs.IDependable) awscdk.CustomResource {
	provider := customresources.NewProvider(stack, jsii.String("MigrateProvider"), &customresources.ProviderProps{
		OnEventHandler: fn,
		// The framework function's log group, with an expiry (Lambda
		// would create one that never expires, left behind on destroy).
		LogGroup: awslogs.NewLogGroup(stack, jsii.String("MigrateProviderLogs"), &awslogs.LogGroupProps{
			Retention:     awslogs.RetentionDays_ONE_MONTH,
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		}),
	})
	suppress(provider, "AwsSolutions-IAM5", "the CDK Provider framework may invoke the migrate function's "+
		"versions and aliases (<function ARN>:*), and nothing else",
		`/^Resource::<Migrate[0-9A-F]{8}\.Arn>:\*$/`)
	props := map[string]interface{}{"Migrations": migrations.Digest(), "RulesSigningKey": rulesKey.SecretArn()}
	if limits != "" {
		props["Limits"] = limits
	}
	cr := awscdk.NewCustomResource(stack, jsii.String("Migration"), &awscdk.CustomResourceProps{
		ServiceToken: provider.ServiceToken(),
		ResourceType: jsii.String("Custom::SluiceMigrate"),
		Properties:   &props,
	})
	if db.dependable != nil {
		cr.Node().AddDependency(db.dependable)
	}
	if len(needs) > 0 {
		cr.Node().AddDependency(needs...)
	}
	return cr
}
