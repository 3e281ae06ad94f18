package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

var updateNoFlag = flag.Bool("update-noflag", false, "rewrite testdata/noflag.sha256 from the app's synth without flags")

// noFlagGolden holds the SHA-256 of each template `npx cdk synth` writes
// with no context flag (as the CLI runs the app: cdk.json's context, no
// account or region), one "<hex>  <file>" line each.
const noFlagGolden = "testdata/noflag.sha256"

// synthNoFlag runs the app as `npx cdk synth -c assetRoot=…` does and
// returns its templates' hashes, one line each, by file name.
func synthNoFlag(t *testing.T, ctx map[string]any) string {
	t.Helper()
	if testing.Short() {
		t.Skip("synthesizes the stack through jsii (node): skipped with -short")
	}
	for _, k := range []string{"CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION"} {
		if os.Getenv(k) != "" {
			t.Skipf("%s is set: the golden templates are env-agnostic", k)
		}
	}
	all := maps.Clone(cdkContext)
	maps.Copy(all, ctx)
	all["assetRoot"] = assetRoot
	out := t.TempDir()
	app, _, err := build(&awscdk.AppProps{Context: &all, Outdir: &out})
	if err != nil {
		t.Fatal(err)
	}
	app.Synth(nil)
	files, err := filepath.Glob(filepath.Join(out, "*.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		lines = append(lines, fmt.Sprintf("%s  %s\n", hex.EncodeToString(sum[:]), filepath.Base(f)))
	}
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// TestNoFlagTemplateUnchanged: a deployment without -c globalRegions
// gets the template it got before global budgets, byte for byte (issue
// 39: "deployments without globalRegions behave and perform exactly as
// before"). testdata/noflag.sha256 was written from the commit before
// them; a change meant for every deployment rewrites it with
// go test ./infra -run TestNoFlagTemplateUnchanged -update-noflag.
func TestNoFlagTemplateUnchanged(t *testing.T) {
	got := synthNoFlag(t, nil)
	if *updateNoFlag {
		if err := os.WriteFile(noFlagGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(noFlagGolden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the no-flag synth's templates changed:\ngot:\n%swant (%s):\n%s"+
			"if every deployment should change, run go test ./infra -run TestNoFlagTemplateUnchanged -update-noflag",
			got, noFlagGolden, want)
	}
}
