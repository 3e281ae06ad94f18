//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/admin"
	sluiceapp "github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/migrations"
)

// The end-to-end test runs the real artifacts: each function's bootstrap,
// built as `make build` builds it (linux, CGO off, -tags lambda.norpc),
// under the AWS Lambda Runtime Interface Emulator, invoked over HTTP with
// the samples. SLUICE_BUILD_DIR points at prebuilt binaries
// (<dir>/<function>/bootstrap; relative to e2e/, so best absolute, such as
// $PWD/build/host from the module root); without it the test builds them
// into a temporary directory.

// buildOnce holds a *buildResult per package built.
var buildOnce sync.Map

type buildResult struct {
	once sync.Once
	path string
	err  error
}

// goBuild builds pkg (relative to the module root) into dir/name once per
// test binary.
func goBuild(t testing.TB, dir, name, pkg string, lambdaTags bool) string {
	t.Helper()
	path, err := build(dir, name, pkg, lambdaTags)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// build is goBuild for callers without a testing.TB (prebuild's goroutines).
func build(dir, name, pkg string, lambdaTags bool) (string, error) {
	v, _ := buildOnce.LoadOrStore(pkg, &buildResult{})
	br := v.(*buildResult)
	br.once.Do(func() {
		br.path = filepath.Join(dir, name)
		args := []string{"build", "-trimpath", "-o", br.path}
		if lambdaTags {
			args = append(args, lambdaBuildFlags...)
		}
		if out, err := goCommand(append(args, pkg)...).CombinedOutput(); err != nil {
			br.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	return br.path, br.err
}

// lambdaBuildFlags are the Makefile's GOFLAGS_LAMBDA but -trimpath.
var lambdaBuildFlags = []string{"-tags", "lambda.norpc", "-ldflags", "-s -w"}

func goCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	return cmd
}

// prebuild builds, before a test needs them, the emulator and the
// bootstraps of functions not built yet: the bootstraps in one go build,
// which compiles and links them in parallel and each shared package once,
// the emulator beside it. bootstrap and rie then find them built. A failed
// build records nothing, so that bootstrap builds the function alone and
// reports its own error.
func prebuild(t testing.TB, functions ...string) {
	t.Helper()
	dir, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = build(dir, "aws-lambda-rie", riePkg, false) })
	defer wg.Wait()
	if os.Getenv("SLUICE_BUILD_DIR") != "" {
		return
	}
	var pending []string
	for _, f := range functions {
		if _, ok := buildOnce.Load("./functions/" + f); !ok {
			pending = append(pending, f)
		}
	}
	if len(pending) == 0 {
		return
	}
	// With several packages, -o names a directory that gets one executable
	// per package, named after its last path element.
	out := filepath.Join(dir, "prebuild") + string(filepath.Separator)
	args := append([]string{"build", "-trimpath", "-o", out}, lambdaBuildFlags...)
	for _, f := range pending {
		args = append(args, "./functions/"+f)
	}
	if b, err := goCommand(args...).CombinedOutput(); err != nil {
		t.Logf("prebuild %v failed, building one by one: %v\n%s", pending, err, b)
		return
	}
	for _, f := range pending {
		v, _ := buildOnce.LoadOrStore("./functions/"+f, &buildResult{})
		br := v.(*buildResult)
		br.once.Do(func() {
			br.path = filepath.Join(dir, f, "bootstrap")
			if br.err = os.MkdirAll(filepath.Dir(br.path), 0o755); br.err == nil {
				br.err = os.Rename(filepath.Join(out, f), br.path)
			}
		})
	}
}

var (
	binDir = sync.OnceValues(func() (string, error) {
		binDirUsed.Store(true)
		return os.MkdirTemp("", "sluice-e2e-")
	})
	binDirUsed atomic.Bool
)

// bootstrap returns the function's bootstrap binary.
func bootstrap(t testing.TB, function string) string {
	t.Helper()
	if d := os.Getenv("SLUICE_BUILD_DIR"); d != "" {
		p, err := filepath.Abs(filepath.Join(d, function, "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("SLUICE_BUILD_DIR: %v (run make build)", err)
		}
		return p
	}
	dir, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, function), 0o755); err != nil {
		t.Fatal(err)
	}
	return goBuild(t, dir, filepath.Join(function, "bootstrap"), "./functions/"+function, true)
}

// rie returns the emulator binary, built from the module's go tool.
func rie(t testing.TB) string {
	t.Helper()
	dir, err := binDir()
	if err != nil {
		t.Fatal(err)
	}
	return goBuild(t, dir, "aws-lambda-rie", riePkg, false)
}

const riePkg = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// emulator is one aws-lambda-rie process running one bootstrap.
type emulator struct {
	url     string
	cmd     *exec.Cmd
	out     *testenv.Buffer
	started time.Time
	done    chan struct{} // closed when the process has exited
}

// startEmulator starts the emulator on free ports, in its own process
// group so that stop kills exactly it and the bootstrap it runs, and waits
// until it listens. A port picked free can be taken by another process
// before the emulator binds it (the emulator then exits at once), so a start
// that dies early is retried on new ports.
func startEmulator(t testing.TB, bin string, env map[string]string) *emulator {
	t.Helper()
	for attempt := 1; ; attempt++ {
		e := launchEmulator(t, bin, env)
		t.Cleanup(func() { e.stop(t) })
		if e.awaitListening(t, 10*time.Second) {
			return e
		}
		e.kill()
		if attempt == 3 {
			t.Fatalf("aws-lambda-rie did not start: exited before listening on %s\nemulator output:\n%s", e.host(), e.out.String())
		}
		t.Logf("aws-lambda-rie start %d failed (exited before listening on %s), retrying on other ports", attempt, e.host())
	}
}

func launchEmulator(t testing.TB, bin string, env map[string]string) *emulator {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(rie(t), "--runtime-interface-emulator-address", addr, "--runtime-api-address", freeAddr(t), bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(), "AWS_LAMBDA_FUNCTION_NAME=" + filepath.Base(filepath.Dir(bin))}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	e := &emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations", cmd: cmd, out: &testenv.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = e.out, e.out
	e.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start aws-lambda-rie: %v", err)
	}
	go func() {
		_ = cmd.Wait()
		close(e.done)
	}()
	return e
}

// host is the emulator's listen address.
func (e *emulator) host() string {
	return strings.TrimSuffix(strings.TrimPrefix(e.url, "http://"), "/2015-03-31/functions/function/invocations")
}

// awaitListening waits until the emulator accepts connections (true) or
// exits (false); the test fails when it does neither within timeout.
func (e *emulator) awaitListening(t testing.TB, timeout time.Duration) bool {
	t.Helper()
	listening := false
	testenv.Await(t, timeout, time.Millisecond, "aws-lambda-rie listening on "+e.host(), func() bool {
		select {
		case <-e.done:
			return true
		default:
		}
		c, err := net.Dial("tcp", e.host())
		if err == nil {
			c.Close()
			listening = true
		}
		return listening
	})
	return listening
}

// kill ends the emulator's process group and waits for it. The negative pid
// is the group: the emulator and its bootstrap, which the emulator would
// otherwise leave behind.
func (e *emulator) kill() {
	select {
	case <-e.done:
	default:
		_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
		<-e.done
	}
}

func (e *emulator) stop(t testing.TB) {
	e.kill()
	if t.Failed() {
		t.Logf("emulator output:\n%s", e.out.String())
	}
}

// invoke posts payload and returns the function's reply; it retries while
// the emulator is not listening yet.
func (e *emulator) invoke(t testing.TB, payload []byte) []byte {
	t.Helper()
	var resp *http.Response
	testenv.Await(t, 30*time.Second, 2*time.Millisecond, "invoke: the emulator listening", func() bool {
		var err error
		resp, err = http.Post(e.url, "application/json", bytes.NewReader(payload))
		return err == nil
	})
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("invoke: %d %s, %v\nemulator output:\n%s", resp.StatusCode, b, err, e.out.String())
	}
	return b
}

// TestEmulator runs bootstraps under the emulator with configuration from
// the environment and checks their replies to the samples: the authorizer
// and check on a seeded database; migrate on an empty one, which it
// migrates; then admin-write (plans-create, rules-create) and admin-read
// (rules-get, rules-list, and a misrouted write) on the database migrate
// made.
func TestEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	redisURL := testenv.RedisURL(t)
	s := seed(t)
	prefix := redisPrefix(t)
	env := map[string]string{
		"REDIS_URL":    redisURL,
		"REDIS_PREFIX": prefix,
		"DATABASE_URL": s.dbURL,
		// ip as a fallback source: the no-key sample becomes anonymous,
		// limited by its source IP, instead of Unauthorized.
		"SUBJECT_SOURCES": "header:x-api-key,ip",
		"LOG_LEVEL":       "info",
		// Generous for a loaded test machine; production keeps 25ms.
		"REDIS_TIMEOUT": "500ms",
	}

	start := time.Now()
	prebuild(t, "authorizer", "check", "migrate", admin.FunctionWrite, admin.FunctionRead)
	t.Logf("binaries ready in %v", time.Since(start).Round(time.Millisecond))

	t.Run("authorizer", func(t *testing.T) {
		e := startEmulator(t, bootstrap(t, "authorizer"), env)
		restRaw := readSample(t, "authorizer-rest.json")
		first := e.invoke(t, restRaw)
		t.Logf("cold start to first reply (emulator start, init, first decision): %v", time.Since(e.started))

		var ev events.APIGatewayCustomAuthorizerRequestTypeRequest
		decodeStrict(t, "authorizer-rest.json", &ev)
		var resp events.APIGatewayCustomAuthorizerResponse
		if err := json.Unmarshal(first, &resp); err != nil {
			t.Fatalf("reply %s: %v", first, err)
		}
		checkREST(t, "authorizer-rest.json", ev, resp, nil, s, "")

		// The route rule allows 5 a minute: the 6th is denied, with the
		// numbers the gateway turns into 429 headers.
		for range 4 {
			e.invoke(t, restRaw)
		}
		if err := json.Unmarshal(e.invoke(t, restRaw), &resp); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"limit": 5.0, "remaining": 0.0, "reset": 60.0, "retryAfter": 12.0, "rule": s.route.ID, "failOpen": false,
			// Every policy that applies is listed, the API-wide rule first.
			"rateLimitPolicy": `"` + s.apiRule.ID + `";q=100;w=60, "` + s.route.ID + `";q=5;w=60`, "rateLimit": `"` + s.route.ID + `";r=0;t=60`}
		if resp.PolicyDocument.Statement[0].Effect != "Deny" || fmt.Sprint(resp.Context) != fmt.Sprint(want) {
			t.Errorf("6th reply = %s %v, want Deny with %v", resp.PolicyDocument.Statement[0].Effect, resp.Context, want)
		}

		var nokey events.APIGatewayCustomAuthorizerRequestTypeRequest
		decodeStrict(t, "authorizer-rest-nokey.json", &nokey)
		if err := json.Unmarshal(e.invoke(t, readSample(t, "authorizer-rest-nokey.json")), &resp); err != nil {
			t.Fatal(err)
		}
		checkREST(t, "authorizer-rest-nokey.json", nokey, resp, nil, s, nokey.RequestContext.Identity.SourceIP)

		var hresp events.APIGatewayV2CustomAuthorizerSimpleResponse
		if err := json.Unmarshal(e.invoke(t, readSample(t, "authorizer-http.json")), &hresp); err != nil || !hresp.IsAuthorized || hresp.Context["rule"] != s.route.ID {
			t.Errorf("HTTP API reply = %+v, %v; want authorized by %s", hresp, err, s.route.ID)
		}
		if out := e.out.String(); !strings.Contains(out, `"message":"rules loaded"`) || strings.Contains(out, "Failed to register internal extension") {
			t.Errorf("want a rules-loaded log line and the SIGTERM extension registered, got:\n%s", out)
		}
	})

	t.Run("check", func(t *testing.T) {
		e := startEmulator(t, bootstrap(t, "check"), env)
		for _, f := range []string{"check.json", "check-url.json", "check-invalid.json"} {
			var r struct {
				StatusCode int               `json:"statusCode"`
				Headers    map[string]string `json:"headers"`
				Body       string            `json:"body"`
			}
			raw := e.invoke(t, readSample(t, f))
			if err := json.Unmarshal(raw, &r); err != nil {
				t.Fatalf("%s reply %s: %v", f, raw, err)
			}
			checkCheck(t, f, r.StatusCode, r.Headers, r.Body, nil, s)
		}
		t.Logf("check: first three replies %v after start", time.Since(e.started))
	})

	// migrate builds the schema of an empty database as a deploy does, and
	// the admin functions then write and read rules in it.
	adminDB := pgtest.NewEmptyDatabase(t)
	ran := false
	migrated := t.Run("migrate", func(t *testing.T) {
		ran = true
		testMigrate(t, adminDB)
	})
	t.Run("admin", func(t *testing.T) {
		switch {
		case !migrated:
			t.Skip("the migrate subtest failed: no schema to administer")
		case !ran: // -run left migrate out
			adminDB = pgtest.NewDatabase(t)
		}
		testAdmin(t, map[string]string{"DATABASE_URL": adminDB, "REDIS_URL": redisURL, "REDIS_PREFIX": prefix, "LOG_LEVEL": "info"})
	})
}

// migrateEvent is the CloudFormation custom resource request the CDK
// Provider framework passes to the migrate function (its onEvent handler):
// CloudFormation's request with ResponseURL redacted to "...", since the
// framework answers CloudFormation itself. cfn.Event lacks ServiceToken.
type migrateEvent struct {
	cfn.Event
	ServiceToken string `json:"ServiceToken"`
}

// testMigrate runs the migrate bootstrap on the empty database at dbURL
// with the custom resource events a deploy sends: Create applies every
// migration, a later Update nothing, Delete leaves the database alone.
func testMigrate(t *testing.T, dbURL string) {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations = %v, %v", files, err)
	}
	sort.Strings(files)
	last, err := strconv.ParseInt(strings.SplitN(files[len(files)-1], "_", 2)[0], 10, 64)
	if err != nil {
		t.Fatalf("migration %s: no version number: %v", files[len(files)-1], err)
	}
	lastStr := strconv.FormatInt(last, 10)

	e := startEmulator(t, bootstrap(t, "migrate"), map[string]string{"DATABASE_URL": dbURL, "LOG_LEVEL": "info"})
	sample := readSample(t, "migrate.json")
	var ev migrateEvent
	decodeStrict(t, "migrate.json", &ev)
	// The sample as the next deploy's Update, and as the stack's Delete.
	later := func(requestType string) []byte {
		var m map[string]any
		if err := json.Unmarshal(sample, &m); err != nil {
			t.Fatal(err)
		}
		m["RequestType"], m["PhysicalResourceId"] = requestType, sluiceapp.MigrationsResourceID
		if requestType == "Update" {
			m["OldResourceProperties"] = m["ResourceProperties"]
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		payload []byte
		want    sluiceapp.MigrateResult
	}{
		{"Create (the sample)", sample, sluiceapp.MigrateResult{Applied: files, Version: last, PhysicalResourceID: sluiceapp.MigrationsResourceID, Data: map[string]string{"Version": lastStr}}},
		{"Update", later("Update"), sluiceapp.MigrateResult{Applied: []string{}, Version: last, PhysicalResourceID: sluiceapp.MigrationsResourceID, Data: map[string]string{"Version": lastStr}}},
		{"Delete", later("Delete"), sluiceapp.MigrateResult{Applied: []string{}, Skipped: "delete", PhysicalResourceID: sluiceapp.MigrationsResourceID}},
	}
	for _, tc := range tests {
		raw := e.invoke(t, tc.payload)
		var got sluiceapp.MigrateResult
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("migrate %s reply %s: %v", tc.name, raw, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("migrate %s reply mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
	t.Logf("migrate: three replies %v after start", time.Since(e.started))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"rules", "plans"} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 0 {
			t.Errorf("SELECT count(*) FROM %s after migrate = %d, %v; want an empty table", table, n, err)
		}
	}
	if out := e.out.String(); !strings.Contains(out, `"message":"migrated"`) || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("want a migrated log line and no errors, got:\n%s", out)
	}
}

// testAdmin runs the admin-write and admin-read bootstraps configured by
// env on a migrated database: it creates the sample plan and rule, a rule
// on that plan, reads the rule back and lists the sample API's rules,
// checks that the rules authorizers load were published to Redis, and
// that admin-read refuses a write sent to it (404, nothing written).
func testAdmin(t *testing.T, env map[string]string) {
	ctx := context.Background()
	snaps := rulesync.NewSnapshots(testenv.Client(t, env["REDIS_URL"], nil), rulesync.SnapshotsOptions{Prefix: env["REDIS_PREFIX"]})
	before, err := snaps.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	emu := map[string]*emulator{}
	for _, f := range []string{admin.FunctionWrite, admin.FunctionRead} {
		emu[f] = startEmulator(t, bootstrap(t, f), env)
	}

	// POST /plans: the sample's gold plan.
	resp := invokeProxy(t, emu[admin.FunctionWrite], readSample(t, "admin-write-plans-create.json"))
	var plan rules.Plan
	checkProxy(t, "POST /plans", resp, 201, &plan)
	if resp.Headers["Location"] != "/plans/gold" || resp.Headers["Etag"] != `"1"` ||
		plan.Name != "gold" || plan.Limit != 1000 || plan.Period != rules.Period(time.Minute) || plan.Version != 1 {
		t.Errorf("POST /plans = %v %+v; want Location /plans/gold, ETag \"1\" and the gold plan, 1000 a minute", resp.Headers, plan)
	}

	// POST /rules: the sample's inline rule, stored as sent, defaults filled.
	raw := readSample(t, "admin-write-rules-create.json")
	var ev events.APIGatewayProxyRequest
	decodeStrict(t, "admin-write-rules-create.json", &ev)
	var want rules.Rule
	if err := json.Unmarshal([]byte(ev.Body), &want); err != nil {
		t.Fatal(err)
	}
	want.Normalize()
	resp = invokeProxy(t, emu[admin.FunctionWrite], raw)
	var created rules.Rule
	checkProxy(t, "POST /rules", resp, 201, &created)
	want.ID, want.Version, want.CreatedAt, want.UpdatedAt = created.ID, 1, created.CreatedAt, created.UpdatedAt
	if diff := cmp.Diff(want, created); diff != "" || created.ID == "" || created.CreatedAt.IsZero() {
		t.Errorf("POST /rules created mismatch (-want +got):\n%s", diff)
	}
	if resp.Headers["Location"] != "/rules/"+created.ID || resp.Headers["Etag"] != `"1"` {
		t.Errorf("POST /rules headers = %v; want Location /rules/%s and ETag \"1\"", resp.Headers, created.ID)
	}

	// POST /rules naming the plan: the numbers come from the plan; an
	// unknown plan is a 400 on the plan field.
	withBody := func(body string) []byte {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m["body"] = body
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	resp = invokeProxy(t, emu[admin.FunctionWrite], withBody(`{"api":"`+want.API+`","route":"*","subject":"key-gold","plan":"gold"}`))
	var onPlan rules.Rule
	checkProxy(t, "POST /rules with plan gold", resp, 201, &onPlan)
	if onPlan.Plan != "gold" || onPlan.Limit != nil || onPlan.Period != 0 || onPlan.ID == "" {
		t.Errorf("POST /rules with plan gold = %+v; want a rule on the plan, without numbers of its own", onPlan)
	}
	resp = invokeProxy(t, emu[admin.FunctionWrite], withBody(`{"api":"`+want.API+`","route":"*","subject":"key-x","plan":"platinum"}`))
	var problem struct {
		Status int
		Errors []rules.FieldError
	}
	checkProxy(t, "POST /rules with an unknown plan", resp, 400, &problem)
	if resp.Headers["Content-Type"] != "application/problem+json" || len(problem.Errors) != 1 || problem.Errors[0].Field != "plan" {
		t.Errorf("POST /rules with an unknown plan = %v %+v; want a problem on the plan field", resp.Headers, problem)
	}

	// GET /rules/{id}: the sample with the created id.
	var getEv events.APIGatewayProxyRequest
	decodeStrict(t, "admin-read-rules-get.json", &getEv)
	sampleID := getEv.PathParameters["id"]
	getRaw := readSample(t, "admin-read-rules-get.json")
	if sampleID == "" || !bytes.Contains(getRaw, []byte(sampleID)) {
		t.Fatalf("admin-read-rules-get.json has no pathParameters.id to substitute")
	}
	resp = invokeProxy(t, emu[admin.FunctionRead], bytes.ReplaceAll(getRaw, []byte(sampleID), []byte(created.ID)))
	var got rules.Rule
	checkProxy(t, "GET /rules/{id}", resp, 200, &got)
	if diff := cmp.Diff(created, got); diff != "" || resp.Headers["Etag"] != `"1"` {
		t.Errorf("GET /rules/%s = ETag %q, mismatch (-created +got):\n%s", created.ID, resp.Headers["Etag"], diff)
	}
	// The sample's own id names no rule: 404, not a 500.
	resp = invokeProxy(t, emu[admin.FunctionRead], getRaw)
	checkProxy(t, "GET /rules/{unknown id}", resp, 404, &problem)

	// GET /rules?api=a1b2c3d4e5: both rules.
	// A write sent to the read function runs no route: 404, naming it.
	resp = invokeProxy(t, emu[admin.FunctionRead], raw)
	checkProxy(t, "POST /rules to admin-read", resp, 404, &problem)

	resp = invokeProxy(t, emu[admin.FunctionRead], readSample(t, "admin-read-rules-list.json"))
	var list struct{ Rules []rules.Rule }
	checkProxy(t, "GET /rules", resp, 200, &list)
	var ids []string
	for _, r := range list.Rules {
		ids = append(ids, r.ID)
	}
	wantIDs := []string{created.ID, onPlan.ID}
	sort.Strings(ids)
	sort.Strings(wantIDs)
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("GET /rules ids mismatch (-want +got):\n%s", diff)
	}

	after, err := snaps.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	published, err := snaps.LoadAll(ctx)
	if err != nil || after <= before || published.Version != after || len(published.Rules) != 2 || len(published.Plans) != 1 {
		t.Errorf("published after three writes: version %d (was %d), snapshot version %d with %d rules and %d plans, %v; want a newer version holding 2 rules and the plan",
			after, before, published.Version, len(published.Rules), len(published.Plans), err)
	}
	for f, e := range emu {
		out := e.out.String()
		if f == admin.FunctionRead {
			// The one error expected: the write sent to it.
			if n := strings.Count(out, "does not serve"); n != 1 {
				t.Errorf("%s logged %d lines about a route it does not serve, want 1:\n%s", f, n, out)
			}
			var kept []string
			for line := range strings.SplitSeq(out, "\n") {
				if !strings.Contains(line, "does not serve") {
					kept = append(kept, line)
				}
			}
			out = strings.Join(kept, "\n")
		}
		if strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) {
			t.Errorf("%s logged errors or warnings:\n%s", f, out)
		}
	}
}

// invokeProxy invokes an API Gateway proxy function.
func invokeProxy(t *testing.T, e *emulator, payload []byte) events.APIGatewayProxyResponse {
	t.Helper()
	raw := e.invoke(t, payload)
	var r events.APIGatewayProxyResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("reply %s: %v", raw, err)
	}
	return r
}

// checkProxy checks an admin reply's status and decodes its JSON body into v.
func checkProxy(t *testing.T, what string, r events.APIGatewayProxyResponse, status int, v any) {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("%s = %d %v %s, want %d", what, r.StatusCode, r.Headers, r.Body, status)
	}
	if err := json.Unmarshal([]byte(r.Body), v); err != nil {
		t.Fatalf("%s body %s: %v", what, r.Body, err)
	}
}

// coldStart starts the emulator, waits for it to listen (so the figure is
// the function's, not the emulator's), and returns the time from the first
// invoke to its reply: the runtime's process start, config, clients, the
// first rules load and one decision.
func coldStart(tb testing.TB, bin string, env map[string]string, payload []byte) time.Duration {
	e := startEmulator(tb, bin, env)
	defer e.kill() // startEmulator logs its output should the test fail
	start := time.Now()
	e.invoke(tb, payload)
	return time.Since(start)
}

// TestColdStart prints cold-start figures of the built authorizer under the
// emulator (run with -v); it asserts nothing about time.
func TestColdStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	s := seed(t)
	env := map[string]string{"REDIS_URL": testenv.RedisURL(t), "REDIS_PREFIX": redisPrefix(t), "DATABASE_URL": s.dbURL}
	bin := bootstrap(t, "authorizer")
	raw := readSample(t, "authorizer-rest.json")
	var runs []time.Duration
	for range 5 {
		runs = append(runs, coldStart(t, bin, env, raw).Round(100*time.Microsecond))
	}
	t.Logf("authorizer cold start under the emulator, first invoke to first reply, 5 runs: %v", runs)
}

// BenchmarkColdStart reports the built authorizer's cold start under the
// emulator as ms/coldstart (the emulator's own start excluded).
func BenchmarkColdStart(b *testing.B) {
	s := seed(b)
	env := map[string]string{"REDIS_URL": testenv.RedisURL(b), "REDIS_PREFIX": redisPrefix(b), "DATABASE_URL": s.dbURL}
	bin := bootstrap(b, "authorizer")
	raw := readSample(b, "authorizer-rest.json")
	var total time.Duration
	for b.Loop() {
		total += coldStart(b, bin, env, raw)
	}
	b.ReportMetric(float64(total)/float64(b.N)/1e6, "ms/coldstart")
}

func TestMain(m *testing.M) {
	code := m.Run()
	// Remove the binaries built for the run, if any.
	if binDirUsed.Load() {
		if dir, err := binDir(); err == nil {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}
