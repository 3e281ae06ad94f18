package sluice

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// The DynamoDB actions of the ledger of global budgets (internal/ledger),
// by who calls them: a decision takes and gives back blocks (Take, Give:
// UpdateItem, and GetItem when a failed condition returns no item), and
// one decision process a Region an hour deletes ended windows (Sweep:
// Scan, DeleteItem; MRSC has no TTL); the admin API's subject routes read
// a budget (Used: GetItem) and reset it (Reset: GetItem, then a
// conditional UpdateItem).
var (
	LedgerSweepActions  = []string{"dynamodb:Scan", "dynamodb:DeleteItem"}
	LedgerDecideActions = append([]string{"dynamodb:UpdateItem", "dynamodb:GetItem"}, LedgerSweepActions...)
	LedgerReadActions   = []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}
)

// MRSCRegionSets are the Region sets in which DynamoDB offers
// multi-Region strong consistency (MRSC): a global table's replicas and
// witness must all be in one set (DynamoDB developer guide, "Multi-Region
// strong consistency", Region availability, as of 2025).
var MRSCRegionSets = map[string][]string{
	"US": {"us-east-1", "us-east-2", "us-west-2"},
	"EU": {"eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"},
	"AP": {"ap-northeast-1", "ap-northeast-2", "ap-northeast-3"},
}

var regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]$`)

// CheckGlobalRegions reports every reason regions and witness cannot make
// an MRSC global table: it takes exactly 3 Regions, 3 replicas or 2
// replicas and a witness, all distinct and in one MRSC Region set, of
// MRSCRegionSets or extraSet (one AWS added since, -c globalRegionSet).
func CheckGlobalRegions(regions []string, witness string, extraSet ...string) error {
	var errs []error
	all := slices.Clone(regions)
	if witness != "" {
		all = append(all, witness)
	}
	switch {
	case witness == "" && len(regions) != 3:
		errs = append(errs, fmt.Errorf("globalRegions %s: %d Regions, want 3 (MRSC takes exactly 3: 3 replicas, or 2 and -c globalWitness=<Region>)",
			strings.Join(regions, ","), len(regions)))
	case witness != "" && len(regions) != 2:
		errs = append(errs, fmt.Errorf("globalRegions %s with globalWitness %s: %d replicas, want 2 (MRSC takes exactly 3 Regions: 2 replicas and the witness)",
			strings.Join(regions, ","), witness, len(regions)))
	}
	seen := map[string]bool{}
	sets := map[string]bool{}
	for _, r := range all {
		if seen[r] {
			errs = append(errs, fmt.Errorf("globalRegions: %s twice: each Region holds one replica or the witness", r))
			continue
		}
		seen[r] = true
		if !regionName.MatchString(r) {
			errs = append(errs, fmt.Errorf("globalRegions: %q is not a Region name (us-east-1)", r))
			continue
		}
		set := mrscSet(r)
		if slices.Contains(extraSet, r) {
			set = "extra"
		}
		if set == "" {
			errs = append(errs, fmt.Errorf("globalRegions: %s offers no multi-Region strong consistency; pick 3 Regions of one set: %s (or name a newer one, -c globalRegionSet)", r, regionSets()))
			continue
		}
		sets[set] = true
	}
	if len(sets) > 1 {
		errs = append(errs, fmt.Errorf("globalRegions: %s mixes MRSC Region sets; MRSC works within one set: %s", strings.Join(all, ","), regionSets()))
	}
	return errors.Join(errs...)
}

// mrscSet returns the name of region's MRSC Region set, or "".
func mrscSet(region string) string {
	for name, rs := range MRSCRegionSets {
		if slices.Contains(rs, region) {
			return name
		}
	}
	return ""
}

// regionSets lists MRSCRegionSets for messages.
func regionSets() string {
	var out []string
	for _, name := range []string{"US", "EU", "AP"} {
		out = append(out, name+" "+strings.Join(MRSCRegionSets[name], ","))
	}
	return strings.Join(out, "; ")
}

// LedgerProps configures the ledger of global budgets.
type LedgerProps struct {
	// TableName is the table's name, the same in every Region
	// (LEDGER_TABLE). Required.
	TableName string
	// Regions hold a replica each; the stack's own Region must be one of
	// them. Required: 3, or 2 with Witness (CheckGlobalRegions).
	Regions []string
	// Witness is the Region of the MRSC witness, which holds no replica
	// the functions use. Default: none.
	Witness string
	// Destroy deletes the table with the stack. Default: the table is
	// retained and deletion-protected in every Region, so `cdk destroy`
	// leaves it (delete it by hand, after turning the protection off).
	Destroy bool
}

// NewLedger creates the ledger: a DynamoDB global table with
// multi-Region strong consistency (a conditional write sees the latest
// version in every Region, so two Regions never take the same tokens),
// on demand, keyed by pk (S). It has no TTL (MRSC has none: ended windows
// are swept) and no point-in-time recovery: an MRSC table must be empty
// when created, so a backup cannot be restored into one, and a lost table
// is replaced by an empty one (each budget starts its window again).
func NewLedger(scope constructs.Construct, id string, p *LedgerProps) awsdynamodb.CfnGlobalTable {
	var replicas []any
	for _, r := range p.Regions {
		replicas = append(replicas, &awsdynamodb.CfnGlobalTable_ReplicaSpecificationProperty{
			Region:                    jsii.String(r),
			DeletionProtectionEnabled: jsii.Bool(!p.Destroy),
		})
	}
	props := &awsdynamodb.CfnGlobalTableProps{
		TableName:              jsii.String(p.TableName),
		BillingMode:            jsii.String("PAY_PER_REQUEST"),
		MultiRegionConsistency: jsii.String("STRONG"),
		AttributeDefinitions: []any{&awsdynamodb.CfnGlobalTable_AttributeDefinitionProperty{
			AttributeName: jsii.String("pk"), AttributeType: jsii.String("S"),
		}},
		KeySchema: []any{&awsdynamodb.CfnGlobalTable_KeySchemaProperty{
			AttributeName: jsii.String("pk"), KeyType: jsii.String("HASH"),
		}},
		Replicas: replicas,
	}
	if p.Witness != "" {
		props.GlobalTableWitnesses = []any{&awsdynamodb.CfnGlobalTable_GlobalTableWitnessProperty{Region: jsii.String(p.Witness)}}
	}
	t := awsdynamodb.NewCfnGlobalTable(scope, jsii.String(id), props)
	if !p.Destroy {
		t.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN, nil)
	}
	return t
}

// LedgerArn is the ARN of the ledger's replica in region, built from its
// name: the table is created in another Region's stack, and a stack
// cannot reference another Region's resources.
func LedgerArn(scope constructs.Construct, region, table string) *string {
	return awscdk.Stack_Of(scope).FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("dynamodb"), Region: jsii.String(region),
		Resource: jsii.String("table"), ResourceName: jsii.String(table),
	})
}

// GrantLedger lets grantee call actions (LedgerDecideActions, …) on the
// ledger table tableArn, and nothing else.
func GrantLedger(grantee awsiam.IGrantable, tableArn *string, actions []string) awsiam.Grant {
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings(actions...), ResourceArns: &[]*string{tableArn},
	})
}

// LedgerEnvironment is what a function that uses the ledger reads:
// LEDGER_TABLE and GLOBAL_REGIONS (the replica Regions; the witness
// decides nothing).
func LedgerEnvironment(table string, regions []string) map[string]string {
	return map[string]string{"LEDGER_TABLE": table, "GLOBAL_REGIONS": strings.Join(regions, ",")}
}

// NewGlobalSubjectKey creates the subject hash key as NewSubjectKey does,
// under a fixed name, replicated by Secrets Manager to replicaRegions:
// every Region of a family must hash a subject to the same ledger item.
func NewGlobalSubjectKey(scope constructs.Construct, id, name string, replicaRegions []string) awssecretsmanager.Secret {
	var replicas []*awssecretsmanager.ReplicaRegion
	for _, r := range replicaRegions {
		replicas = append(replicas, &awssecretsmanager.ReplicaRegion{Region: jsii.String(r)})
	}
	p := randomKey(subjectKeyDescription)
	p.SecretName, p.ReplicaRegions = jsii.String(name), &replicas
	return awssecretsmanager.NewSecret(scope, jsii.String(id), p)
}

// ImportGlobalSubjectKey imports this Region's replica of a subject hash
// key NewGlobalSubjectKey made in another Region, by name: its ARN is the
// partial one (no suffix), which a read grant matches with Secrets
// Manager's 6-character suffix.
func ImportGlobalSubjectKey(scope constructs.Construct, id, name string) awssecretsmanager.ISecret {
	return awssecretsmanager.Secret_FromSecretNameV2(scope, jsii.String(id), jsii.String(name))
}
