//go:build linux

package events_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The end-to-end test runs the real artifacts: each function's bootstrap,
// built as `make build` builds it (linux, CGO off, -tags lambda.norpc),
// under the AWS Lambda Runtime Interface Emulator, invoked over HTTP with
// the samples. SLUICE_BUILD_DIR points at prebuilt binaries
// (<dir>/<function>/bootstrap, such as build/host); without it the test
// builds them into a temporary directory.

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
	v, _ := buildOnce.LoadOrStore(pkg, &buildResult{})
	br := v.(*buildResult)
	br.once.Do(func() {
		br.path = filepath.Join(dir, name)
		args := []string{"build", "-trimpath", "-o", br.path}
		if lambdaTags {
			args = append(args, "-tags", "lambda.norpc", "-ldflags", "-s -w")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			br.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if br.err != nil {
		t.Fatal(br.err)
	}
	return br.path
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
	return goBuild(t, dir, "aws-lambda-rie", "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie", false)
}

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
		err := e.waitListening(10 * time.Second)
		if err == nil {
			t.Cleanup(func() { e.stop(t) })
			return e
		}
		e.kill()
		if attempt == 3 {
			t.Fatalf("aws-lambda-rie did not start: %v\nemulator output:\n%s", err, e.out.String())
		}
		t.Logf("aws-lambda-rie start %d failed (%v), retrying on other ports", attempt, err)
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

// waitListening waits until the emulator accepts connections, or fails when
// it exits or the timeout passes.
func (e *emulator) waitListening(timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; {
		select {
		case <-e.done:
			return fmt.Errorf("exited before listening on %s", e.host())
		default:
		}
		c, err := net.Dial("tcp", e.host())
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v: %w", e.host(), timeout, err)
		}
		time.Sleep(time.Millisecond)
	}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Post(e.url, "application/json", bytes.NewReader(payload))
		if err == nil {
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("invoke: %d %s, %v\nemulator output:\n%s", resp.StatusCode, b, err, e.out.String())
			}
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("invoke: %v\nemulator output:\n%s", err, e.out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEmulator runs the authorizer and check bootstraps under the emulator
// with configuration from the environment and checks their replies to the
// samples.
func TestEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds binaries")
	}
	redisURL := testenv.RedisURL(t)
	s := seed(t)
	env := map[string]string{
		"REDIS_URL":    redisURL,
		"DATABASE_URL": s.dbURL,
		// ip as a fallback source: the no-key sample becomes anonymous,
		// limited by its source IP, instead of Unauthorized.
		"SUBJECT_SOURCES": "header:x-api-key,ip",
		"LOG_LEVEL":       "info",
		// Generous for a loaded test machine; production keeps 25ms.
		"REDIS_TIMEOUT": "500ms",
	}

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
			"rateLimitPolicy": `"` + s.route.ID + `";q=5;w=60`, "rateLimit": `"` + s.route.ID + `";r=0;t=60`}
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
}

// coldStart starts the emulator, waits for it to listen (so the figure is
// the function's, not the emulator's), and returns the time from the first
// invoke to its reply: the runtime's process start, config, clients, the
// first rules load and one decision.
func coldStart(tb testing.TB, bin string, env map[string]string, payload []byte) time.Duration {
	e := startEmulator(tb, bin, env)
	defer e.stop(tb)
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
	env := map[string]string{"REDIS_URL": testenv.RedisURL(t), "DATABASE_URL": s.dbURL}
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
	env := map[string]string{"REDIS_URL": testenv.RedisURL(b), "DATABASE_URL": s.dbURL}
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
