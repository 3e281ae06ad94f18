package main

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLookupFirstPass runs the app as the CDK CLI does for a brought VPC
// on a fresh checkout (no cdk.context.json): the context arrives in
// CDK_CONTEXT_JSON without the lookup's answer, the app must exit 0 with
// the lookup listed as missing in the cloud assembly's manifest, and the
// CLI then runs it again with the answer (here, byo's), which must pass
// the schema check as every other template does. The CLI does the lookup
// only after a first pass that exits 0 (aws-cdk CLI, "Context" in the
// CDK developer guide: "If a required value isn't in the context, the
// CDK CLI ... runs the app again").
func TestLookupFirstPass(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the app twice (~30 s)")
	}
	bin := filepath.Join(t.TempDir(), "infra")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./infra: %v\n%s", err, out)
	}
	ctx := maps.Clone(cdkContext)
	ctx["vpcId"] = byoVpcID
	ctx["assetRoot"] = assetRoot
	ctx["profile"] = "small"

	// The first pass: no answer.
	manifest, report := runApp(t, bin, ctx)
	var missing []string
	for _, m := range manifest.Missing {
		missing = append(missing, m.Provider)
	}
	if len(missing) != 1 || missing[0] != "vpc-provider" {
		t.Errorf("first pass: missing context %v, want the one VPC lookup", missing)
	}
	// The placeholder's values are all the check may find: anything else
	// would go unreported on the second pass's way too.
	for _, v := range report {
		placeholder := strings.Contains(v.Description, "'p-") || strings.Contains(v.Description, "'vpc-12345'") ||
			strings.HasPrefix(v.RuleName, "Annotation::")
		if !placeholder {
			t.Errorf("first pass: finding %s (%s) %q is not about the lookup's placeholder", v.RuleName, v.Severity, v.Description)
		}
	}

	// The second pass: the answer the CLI wrote to cdk.context.json.
	maps.Copy(ctx, variantContext(byo))
	manifest, report = runApp(t, bin, ctx)
	if len(manifest.Missing) != 0 {
		t.Errorf("second pass: missing context %v, want none", manifest.Missing)
	}
	for _, v := range report {
		if !strings.HasPrefix(v.RuleName, "Annotation::") {
			t.Errorf("second pass: finding %s (%s) %q", v.RuleName, v.Severity, v.Description)
		}
	}
}

type violation struct{ RuleName, Severity, Description string }

type assemblyManifest struct {
	Missing []struct{ Key, Provider string }
}

// runApp runs the built app as the CDK CLI does (context in
// CDK_CONTEXT_JSON, output directory in CDK_OUTDIR, the account and region
// the CLI resolved) and returns the assembly's manifest and the schema
// check's findings; it fails the test unless the app exits 0.
func runApp(t *testing.T, bin string, ctx map[string]any) (assemblyManifest, []violation) {
	t.Helper()
	js, err := json.Marshal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CDK_CONTEXT_JSON="+string(js), "CDK_OUTDIR="+out,
		"CDK_DEFAULT_ACCOUNT="+byoAccount, "CDK_DEFAULT_REGION="+byoRegion)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("app exited %v, want 0:\n%.3000s", err, b)
	}
	var m assemblyManifest
	mb, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err == nil {
		err = json.Unmarshal(mb, &m)
	}
	if err != nil {
		t.Fatalf("cloud assembly manifest: %v", err)
	}
	var r struct {
		PluginReports []struct{ Violations []violation }
	}
	if rb, err := os.ReadFile(filepath.Join(out, "validation-report.json")); err == nil {
		if err := json.Unmarshal(rb, &r); err != nil {
			t.Fatalf("validation report: %v", err)
		}
	}
	var vs []violation
	for _, p := range r.PluginReports {
		vs = append(vs, p.Violations...)
	}
	return m, vs
}
