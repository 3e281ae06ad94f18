package main

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cliPass is one run of the app as the CDK CLI makes it: the context in
// CDK_CONTEXT_JSON, the CLI's account and Region in the environment.
type cliPass struct {
	out     []byte
	err     error
	missing []missingContext
	tmpls   map[string]map[string]any // by stack name
}

type missingContext struct {
	Key, Provider string
	Props         map[string]any
}

func runCLIPass(t *testing.T, bin string, ctx map[string]any) cliPass {
	t.Helper()
	js, err := json.Marshal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CDK_CONTEXT_JSON="+string(js), "CDK_OUTDIR="+dir,
		"CDK_DEFAULT_ACCOUNT="+byoAccount, "CDK_DEFAULT_REGION="+byoRegion)
	p := cliPass{tmpls: map[string]map[string]any{}}
	p.out, p.err = cmd.CombinedOutput()
	if p.err != nil {
		return p
	}
	var m struct{ Missing []missingContext }
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatalf("cloud assembly manifest: %v", err)
	}
	p.missing = m.Missing
	files, _ := filepath.Glob(filepath.Join(dir, "*.template.json"))
	for _, f := range files {
		var tmpl map[string]any
		b, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(b, &tmpl)
		}
		if err != nil {
			t.Fatal(err)
		}
		p.tmpls[strings.TrimSuffix(filepath.Base(f), ".template.json")] = tmpl
	}
	return p
}

// ssmLookups are the pass's missing SSM parameter lookups.
func (p cliPass) ssmLookups() []missingContext {
	var out []missingContext
	for _, m := range p.missing {
		if m.Provider == "ssm" {
			out = append(out, m)
		}
	}
	return out
}

// answer returns ctx with the answers the CLI writes to cdk.context.json
// for the pass's SSM lookups: recorded where a Region holds the family's
// record (deployed), else the lookup's default (the parameter is missing).
func answer(ctx map[string]any, lookups []missingContext, deployed []string, recorded string) map[string]any {
	ctx = maps.Clone(ctx)
	for _, l := range lookups {
		if r, _ := l.Props["region"].(string); slices.Contains(deployed, r) {
			ctx[l.Key] = recorded
		} else {
			ctx[l.Key] = l.Props["dummyValue"]
		}
	}
	return ctx
}

// TestRegionSetRecorded runs the built app as the CDK CLI does, on a
// family of two Regions and a witness, then on each set that family
// cannot become once deployed: each Region's stack records the set in an
// SSM parameter (kept with the ledger), the CLI looks it up through the
// context under a key holding the set asked for, and a synth asking for
// another set than the recorded one fails, naming both, while the same
// set synthesizes as before.
func TestRegionSetRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the app (~2 min)")
	}
	bin := filepath.Join(t.TempDir(), "infra")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./infra: %v\n%s", err, out)
	}
	base := maps.Clone(cdkContext)
	base["assetRoot"] = assetRoot
	base["profile"] = "small"
	family := func(regions, witness string) map[string]any {
		ctx := maps.Clone(base)
		ctx["globalRegions"] = regions
		if witness != "" {
			ctx["globalWitness"] = witness
		}
		return ctx
	}
	deployed := []string{"eu-west-1", "eu-west-2"}
	const recorded = "globalRegions=eu-west-1,eu-west-2 globalWitness=eu-west-3"
	first := family("eu-west-1,eu-west-2", "eu-west-3")

	// The first deploy: nothing recorded anywhere.
	p := runCLIPass(t, bin, first)
	if p.err != nil {
		t.Fatalf("first pass: %v\n%.3000s", p.err, p.out)
	}
	lookups := p.ssmLookups()
	var regions []string
	for _, l := range lookups {
		regions = append(regions, l.Props["region"].(string))
		if l.Props["parameterName"] != "/sluice/Sluice/global-regions" || l.Props["additionalCacheKey"] != recorded {
			t.Errorf("lookup %s: props %v, want /sluice/Sluice/global-regions keyed by %q", l.Key, l.Props, recorded)
		}
	}
	slices.Sort(regions)
	if !slices.Equal(regions, deployed) {
		t.Errorf("SSM lookups in %v, want one in each Region with a stack, %v", regions, deployed)
	}
	for name, tmpl := range p.tmpls {
		params := resources(tmpl, "AWS::SSM::Parameter")
		if len(params) != 1 || params[0].Props["Name"] != "/sluice/Sluice/global-regions" || params[0].Props["Value"] != recorded {
			t.Errorf("%s: SSM parameters %v, want /sluice/Sluice/global-regions = %q", name, params, recorded)
			continue
		}
		res := tmpl["Resources"].(map[string]any)[params[0].ID].(map[string]any)
		if res["DeletionPolicy"] != "Retain" {
			t.Errorf("%s: the record's DeletionPolicy = %v, want Retain, as the ledger's", name, res["DeletionPolicy"])
		}
	}
	answered := answer(first, lookups, nil, recorded)
	if p := runCLIPass(t, bin, answered); p.err != nil || len(p.ssmLookups()) != 0 {
		t.Fatalf("second pass (nothing recorded): %v, lookups %v\n%.3000s", p.err, p.ssmLookups(), p.out)
	}
	// Deployed, the same set again: the record matches.
	if p := runCLIPass(t, bin, answer(first, lookups, deployed, recorded)); p.err != nil {
		t.Errorf("the deployed set again: %v\n%.3000s", p.err, p.out)
	}

	for _, c := range []struct{ name, regions, witness string }{
		{"3 replicas", "eu-west-1,eu-west-2,eu-west-3", ""},
		{"another witness", "eu-west-1,eu-west-2", "eu-central-1"},
		{"a swapped Region", "eu-west-1,eu-central-1", "eu-west-3"},
		{"another first Region", "eu-west-2,eu-west-1", "eu-west-3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			refused(t, bin, family(c.regions, c.witness), answered, deployed, recorded)
		})
	}
}

// refused runs the two passes of a synth of ctx, the CLI answering
// from the family deployed with recorded, and wants it refused.
func refused(t *testing.T, bin string, ctx, answered map[string]any, deployed []string, recorded string) {
	p := runCLIPass(t, bin, ctx)
	if p.err != nil {
		t.Fatalf("first pass: %v\n%.3000s", p.err, p.out)
	}
	// Keyed by the new set: not answered by the cached "none" of the
	// first deploy's synth.
	for _, l := range p.ssmLookups() {
		if _, cached := answered[l.Key]; cached {
			t.Errorf("lookup %s was answered before, for another set", l.Key)
		}
	}
	p = runCLIPass(t, bin, answer(ctx, p.ssmLookups(), deployed, recorded))
	if p.err == nil {
		t.Fatal("synth passed, want it refused")
	}
	for _, want := range []string{"deployed with -c " + recorded, "a new family with a new ledger"} {
		if !strings.Contains(string(p.out), want) {
			t.Errorf("the refusal does not say %q:\n%.2000s", want, p.out)
		}
	}
}
