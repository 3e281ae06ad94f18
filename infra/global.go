// A family of Regions sharing global budgets: the ledger and the subject
// hash key, created by the first Region's stack, used by name elsewhere.

package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsssm"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

// Global is a family of stacks, one per Region, sharing the ledger of
// global budgets and the subject hash key.
type Global struct {
	// Regions hold a stack and a ledger replica each: 3, or 2 with
	// Witness, in one MRSC Region set (sluice.CheckGlobalRegions). The
	// first one's stack creates the ledger and the subject hash key,
	// which Secrets Manager replicates to the others.
	Regions []string
	// Witness is the ledger's MRSC witness Region. Default: none.
	Witness string
	// Name names the ledger table (<Name>-ledger) and the subject hash
	// key's secret (<Name>-subject-key), the same in every Region.
	Name string
	// DestroyLedger deletes the ledger with the first Region's stack.
	// Default: retained and deletion-protected.
	DestroyLedger bool
	// RegionSet is one more MRSC Region set, for one AWS adds after
	// sluice.MRSCRegionSets was written. Default: none.
	RegionSet []string
}

// ledgerTable is the name of the ledger table.
func (g *Global) ledgerTable() string { return g.Name + "-ledger" }

// subjectKeyName is the name of the subject hash key's secret.
func (g *Global) subjectKeyName() string { return g.Name + "-subject-key" }

// validate reports why g cannot make p one Region of a family.
func (g *Global) validate(p *StackProps) []error {
	var errs []error
	if err := sluice.CheckGlobalRegions(g.Regions, g.Witness, g.RegionSet...); err != nil {
		errs = append(errs, err)
	}
	region := ""
	if p.Env != nil && p.Env.Region != nil {
		region = *p.Env.Region
	}
	if !slices.Contains(g.Regions, region) {
		errs = append(errs, fmt.Errorf("Global: the stack's Region %q is not one of %s", region, strings.Join(g.Regions, ",")))
	}
	if !tableName.MatchString(g.ledgerTable()) {
		errs = append(errs, fmt.Errorf("Global: ledger table name %q: want 3 to 255 letters, digits, '_', '-' or '.'", g.ledgerTable()))
	}
	return errs
}

// regionSet is the family's Regions and witness as the flags spell
// them: what each Region's stack records.
func (g *Global) regionSet() string {
	s := "globalRegions=" + strings.Join(g.Regions, ",")
	if g.Witness != "" {
		s += " globalWitness=" + g.Witness
	}
	return s
}

// regionSetParameter names the SSM parameter holding regionSet.
func (g *Global) regionSetParameter() string { return "/sluice/" + g.Name + "/global-regions" }

// noRegionSet is the lookup's answer where no family was deployed.
const noRegionSet = "none"

// recordRegionSet records the family's Regions and witness in stack's
// Region and refuses a set that a deployed family cannot become: MRSC
// fixes a table's replicas and witness when it is created, so 2 and a
// witness cannot become 3 replicas, nor take another witness or Region,
// and the first Region creates the ledger. The record (an SSM parameter,
// kept as long as the ledger) is read back at synth through the CDK
// context: the CLI looks it up in each Region once the stack has an
// account, and caches the answer in cdk.context.json under a key that
// holds the set asked for, so a changed set is always looked up afresh
// while an unchanged one is not looked up again.
func recordRegionSet(stack awscdk.Stack, g *Global) error {
	param := awsssm.NewStringParameter(stack, jsii.String("GlobalRegionSet"), &awsssm.StringParameterProps{
		ParameterName: jsii.String(g.regionSetParameter()),
		StringValue:   jsii.String(g.regionSet()),
		Description:   jsii.String("The Regions and witness of the ledger " + g.ledgerTable() + ", fixed when it was created"),
	})
	if !g.DestroyLedger {
		param.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
	}
	if *awscdk.Token_IsUnresolved(stack.Account()) {
		return nil // an environment-agnostic synth: nothing to look up
	}
	got := *awsssm.StringParameter_ValueFromLookup(stack, jsii.String(g.regionSetParameter()), jsii.String(noRegionSet),
		&awsssm.StringParameterLookupOptions{AdditionalCacheKey: jsii.String(g.regionSet())})
	if got == noRegionSet || got == g.regionSet() {
		return nil
	}
	return fmt.Errorf("-c globalRegions: the family %s was deployed with -c %s (SSM parameter %s in %s); "+
		"an MRSC ledger keeps the Regions and witness it was created with, so it cannot become -c %s. "+
		"Deploy the recorded set, or a new family with a new ledger (-c stackName=<another name>; docs/deploy.md#global-budgets)",
		g.Name, got, g.regionSetParameter(), *stack.Region(), g.regionSet())
}

// tableName matches a DynamoDB table name.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// newGlobal returns the subject hash key and, in a family of Regions
// (Global), the ledger's environment and this Region's replica ARN. The
// first Region's stack creates the ledger and the key, replicated to the
// others, whose stacks use them by name: no stack references another
// Region's. Without Global, the key alone, as NewSubjectKey makes it.
func newGlobal(stack awscdk.Stack, p *StackProps) (key awssecretsmanager.ISecret, env map[string]string, ledgerArn *string) {
	const smg4 = "Rotating the subject hash key renames every bucket, so every subject starts full again: rotate it by hand, when that is wanted."
	g := p.Global
	if g == nil {
		k := sluice.NewSubjectKey(stack, "SubjectHmacKey")
		suppress(k, "AwsSolutions-SMG4", smg4)
		return k, nil, nil
	}
	region := *p.Env.Region
	if region != g.Regions[0] {
		key = sluice.ImportGlobalSubjectKey(stack, "SubjectHmacKey", g.subjectKeyName())
	} else {
		k := sluice.NewGlobalSubjectKey(stack, "SubjectHmacKey", g.subjectKeyName(), g.Regions[1:])
		suppress(k, "AwsSolutions-SMG4", smg4)
		// The key and the ledger have one lifetime: the ledger's items are
		// named with subjects hashed by this key, so a ledger kept past
		// `cdk destroy` beside a new key would match nothing. Both stay
		// (or go, with DestroyLedger); the next deploy adopts both by name
		// (--import-existing-resources, TestGlobalLifetime).
		if !g.DestroyLedger {
			k.ApplyRemovalPolicy(awscdk.RemovalPolicy_RETAIN)
		}
		// Without that flag, the deploy fails on the key's name: before
		// ElastiCache and Aurora, not after their half hour.
		for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
			r, ok := c.(awscdk.CfnResource)
			if !ok || !*awscdk.CfnResource_IsCfnResource(c) {
				continue
			}
			switch *r.CfnResourceType() {
			case "AWS::ElastiCache::ReplicationGroup", "AWS::ElastiCache::ServerlessCache", "AWS::RDS::DBCluster":
				r.Node().AddDependency(k)
			}
		}
		key = k
		ledger := sluice.NewLedger(stack, "Ledger", &sluice.LedgerProps{
			TableName: g.ledgerTable(), Regions: g.Regions, Witness: g.Witness, Destroy: g.DestroyLedger,
		})
		suppress(ledger, "AwsSolutions-DDB3", "MRSC creates a table empty, so no backup can be restored into "+
			"one: a lost ledger is replaced by an empty table (each global budget starts its window again), "+
			"and deletion protection with a RETAIN policy guards against the usual loss")
	}
	return key, sluice.LedgerEnvironment(g.ledgerTable(), g.Regions), sluice.LedgerArn(stack, region, g.ledgerTable())
}
