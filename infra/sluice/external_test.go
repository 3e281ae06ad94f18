package sluice_test

import (
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// externalApp is a CDK app of another team: it imports the construct and
// nothing else of Sluice, and sets no AssetDir.
const externalApp = `package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/jsii-runtime-go"

	"github.com/sluicehq/sluice/infra/sluice"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	stack := awscdk.NewStack(app, jsii.String("Shop"), nil)
	api := awsapigateway.NewRestApi(stack, jsii.String("ShopApi"), nil)
	limiter := sluice.NewAuthorizer(stack, "RateLimit", &sluice.AuthorizerProps{SubjectSources: "header:x-api-key"})
	sluice.AddGatewayResponses(stack, "RateLimit", api)
	api.Root().AddMethod(jsii.String("GET"), awsapigateway.NewMockIntegration(nil), limiter.MethodOptions())
	app.Synth(nil)
}
`

// TestExternalAppBuildsItsAuthorizer is what a team importing the construct
// does: a module outside the repository (its go.mod requires sluice,
// replaced by this checkout), `go mod tidy`, `go build`, and a synth. The
// authorizer asset must hold a linux/arm64 static `bootstrap` of
// functions/authorizer built with the Lambda flags, with no `make build` and
// no AssetDir. go mod tidy must find every checksum the Lambda needs
// (lambdadeps.go), or the construct's go build fails on a missing go.sum
// entry. The first run compiles the Lambda's dependencies for arm64
// (minutes on 2 cores); later runs reuse go's build cache.
func TestExternalAppBuildsItsAuthorizer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and synthesizes a CDK app: skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	gocache, err := exec.Command(goBin, "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}

	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/shop\n\ngo 1.26.8\n\nrequire github.com/sluicehq/sluice v0.0.0\n\n"+
		"replace github.com/sluicehq/sluice => "+checkout+"\n")
	write("main.go", externalApp)
	// The checkout's go.sum holds every checksum the app can need, so tidy
	// asks the checksum database for none (the tests reach the module proxy
	// only); tidy still drops what the app does not use.
	sum, err := os.ReadFile(filepath.Join(checkout, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))

	out := filepath.Join(dir, "cdk.out")
	env := append(os.Environ(),
		// The construct's binaries go to a cache of this test's own; go's
		// build cache stays the shared one, so the compile is reused.
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		"GOCACHE="+strings.TrimSpace(string(gocache)),
		"GOFLAGS=", // no -mod=mod: the tidied go.mod and go.sum must suffice
		"CDK_OUTDIR="+out,
		// What the cdk CLI passes: the template then names each Lambda's
		// asset directory.
		`CDK_CONTEXT_JSON={"aws:cdk:enable-asset-metadata":true}`,
		"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20",
	)
	run := func(name string, args ...string) {
		t.Helper()
		start := time.Now()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		b, err := cmd.CombinedOutput()
		t.Logf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
		}
	}
	run(goBin, "mod", "tidy")
	run(goBin, "build", "-o", "app", ".")
	run(filepath.Join(dir, "app")) // the synth, building the authorizer

	b, err := os.ReadFile(filepath.Join(out, "Shop.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var template struct {
		Resources map[string]struct {
			Type     string
			Metadata map[string]any
		}
	}
	if err := json.Unmarshal(b, &template); err != nil {
		t.Fatal(err)
	}
	var assets []string
	for _, r := range template.Resources {
		if r.Type == "AWS::Lambda::Function" {
			if p, ok := r.Metadata["aws:asset:path"].(string); ok {
				assets = append(assets, p)
			}
		}
	}
	if len(assets) != 1 {
		t.Fatalf("Lambda assets in the template = %q, want the authorizer's alone", assets)
	}
	bootstrap := filepath.Join(out, assets[0], "bootstrap")
	checkLambdaBinary(t, bootstrap, "github.com/sluicehq/sluice/functions/authorizer")
}

// checkLambdaBinary fails unless path is a static linux/arm64 ELF of
// package pkg built with the Lambda flags.
func checkLambdaBinary(t *testing.T, path, pkg string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 {
		t.Errorf("bootstrap is %v %v, want EM_AARCH64 ELFCLASS64", f.Machine, f.Class)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("bootstrap has a program interpreter: dynamically linked, want static (CGO_ENABLED=0)")
		}
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("bootstrap build info: %v", err)
	}
	if info.Path != pkg {
		t.Errorf("bootstrap is %s, want %s", info.Path, pkg)
	}
	want := map[string]string{"GOOS": "linux", "GOARCH": "arm64", "CGO_ENABLED": "0", "-tags": "lambda.norpc", "-trimpath": "true"}
	for _, s := range info.Settings {
		if w, ok := want[s.Key]; ok {
			if s.Value != w {
				t.Errorf("bootstrap built with %s=%s, want %s", s.Key, s.Value, w)
			}
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("bootstrap build settings lack %v", want)
	}
}
