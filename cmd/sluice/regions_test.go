package main

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/local"
	"github.com/sluicehq/sluice/internal/rulesync"
	"github.com/sluicehq/sluice/internal/testenv"
)

var (
	regionLine   = regexp.MustCompile(`^  region (local-\d)\s+(http://\S+)\s`)
	rulesKeyLine = regexp.MustCompile(`^  rules key  (\S+)  \(RULES_PUBLIC_KEY`)
)

// startRegions runs the built binary as a newcomer does, `sluice local
// --regions n`, over the test dynalite (--ledger-url) and a ledger table
// of the test's own, and returns each Region's base URL once the banner
// is out; Ctrl-C stops it when the test ends, and it must exit cleanly.
// The banner must print the rules public key (RULES_PUBLIC_KEY) of the
// signing key kept in its state directory, as one Region's does.
func startRegions(t *testing.T, n int, token string) []string {
	t.Helper()
	state := t.TempDir()
	cmd := exec.Command(sluiceBin, "local", "--regions", fmt.Sprint(n), "--addr", "127.0.0.1:0",
		"--seed", "../../examples/rules.json", "--ledger-url", testenv.DynamoDBURL(t))
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+token, "REDIS_URL=", "DATABASE_URL=", "LOG_LEVEL=warn",
		"REDIS_TIMEOUT=1s", "LEDGER_TABLE=sltest-regions-"+testenv.Random(t), "SLUICE_STATE_DIR="+state,
		"RULES_SIGNING_KEY=", "RULES_SIGNING_KEY_SECRET_ARN=", "RULES_PUBLIC_KEY=",
		// A loaded machine's dynalite may answer a take later than 200 ms,
		// and the fail-open allowance would admit: the test is exactness.
		"LEDGER_TIMEOUT=5s")
	out := &testenv.Buffer{}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sluice local --regions %d: %v", n, err)
	}
	ready := make(chan []string, 1)
	var rulesKey string
	go func() {
		sc := bufio.NewScanner(stdout)
		var bases []string
		for sc.Scan() {
			fmt.Fprintln(out, sc.Text())
			if m := regionLine.FindStringSubmatch(sc.Text() + " "); m != nil {
				bases = append(bases, m[2])
			}
			if m := rulesKeyLine.FindStringSubmatch(sc.Text()); m != nil {
				rulesKey = m[1]
			}
			if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				ready <- bases
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) //nolint:errcheck // gone already: Wait says why
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sluice local --regions after Ctrl-C: %v, want a clean exit; output:\n%s", err, out)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill() //nolint:errcheck // it did not stop
			t.Errorf("sluice local --regions did not stop within 20s of Ctrl-C; output:\n%s", out)
		}
	})
	select {
	case bases := <-ready:
		if len(bases) != n {
			t.Fatalf("banner names %d Regions, want %d; output:\n%s", len(bases), n, out)
		}
		secret, err := os.ReadFile(filepath.Join(state, "rules-signing.key"))
		if err != nil {
			t.Fatalf("no rules-signing.key in the state directory: %v", err)
		}
		want := rulesync.FormatPublicKey(rulesync.NewSigningKey(bytes.TrimSpace(secret)).Public().(ed25519.PublicKey))
		if rulesKey != want {
			t.Fatalf("banner rules key = %q, want the kept secret's public half %q; output:\n%s", rulesKey, want, out)
		}
		return bases
	case err := <-done:
		done <- err
		t.Fatalf("sluice local --regions exited before serving: %v; output:\n%s", err, out)
	case <-time.After(60 * time.Second):
		t.Fatalf("sluice local --regions printed no banner within 60s; output:\n%s", out)
	}
	return nil
}

// hello sends GET base/hello with the API key and returns the status.
func hello(t *testing.T, base, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	resp, _ := do(t, req)
	return resp.StatusCode
}

// regionCLI runs the built binary against one Region's admin API.
func regionCLI(t *testing.T, base, token string, args ...string) string {
	t.Helper()
	cmd := exec.Command(sluiceBin, args...)
	cmd.Env = append(os.Environ(), "SLUICE_ENDPOINT="+base+"/admin", "SLUICE_ADMIN_TOKEN="+token)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("sluice %s against %s: %v\n%s%s", strings.Join(args, " "), base, err, o.String(), e.String())
	}
	return o.String()
}

// TestLocalRegions: three local Regions over one dynalite hold the seeded
// global quota exactly, whichever Region the requests reach, as the
// subject view of every Region accounts for: admitted + leased unspent ==
// global used == limit; and a rule written through one Region reaches
// another.
func TestLocalRegions(t *testing.T) {
	t.Parallel()
	token := "regions-" + testenv.Random(t)
	bases := startRegions(t, 3, token)

	// Every Region wants 8 at once (24 in all; the regional rate of 10 a
	// minute is never reached): the global quota of 10 a day admits at
	// most 10, and every token the ledger counts is spent or still leased
	// to a Region.
	const perRegion = 8
	var admitted atomic.Int64
	send := func(base string) {
		switch code := hello(t, base, local.GlobalDemoSubject); code {
		case http.StatusOK:
			admitted.Add(1)
		case http.StatusTooManyRequests:
		default:
			t.Errorf("GET %s/hello = %d, want 200 or 429", base, code)
		}
	}
	var wg sync.WaitGroup
	for _, base := range bases {
		wg.Go(func() {
			for range perRegion {
				send(base)
			}
		})
	}
	wg.Wait()
	views := func(settled bool) (used, spent, leased []int64) {
		for _, base := range bases {
			u, s, l := globalView(t, base, token, settled)
			used, spent, leased = append(used, u), append(spent, s), append(leased, l)
		}
		return used, spent, leased
	}
	used, _, leased := views(false)
	t.Logf("burst: admitted %d, leased %v, global used %d", admitted.Load(), leased, used[0])
	if n := admitted.Load(); n > local.GlobalDemoLimit || n+sum(leased) > used[0] || used[0] > local.GlobalDemoLimit {
		t.Errorf("after %d requests over 3 Regions: admitted %d, leased %v, global used %d: want admitted + leased <= used <= %d",
			3*perRegion, n, leased, used[0], local.GlobalDemoLimit)
	}

	// A token a Region leased while its own request was denied (a
	// background refill racing a waiting one) stays in its pool; its next
	// request, once the 1s deny cache lets one through, spends it. So
	// keep asking every Region until the quota is spent: exactly 10.
	testenv.Await(t, 20*time.Second, 250*time.Millisecond, "the global quota spent over 3 Regions", func() bool {
		if admitted.Load() >= local.GlobalDemoLimit {
			return true
		}
		for _, base := range bases {
			send(base)
		}
		return false
	})
	for _, base := range bases {
		send(base)
	}
	if got := admitted.Load(); got != local.GlobalDemoLimit {
		t.Errorf("admitted %d over 3 Regions, want exactly the global quota %d", got, local.GlobalDemoLimit)
	}
	used, spent, leased := views(true)
	for i := range bases {
		if used[i] != local.GlobalDemoLimit {
			t.Errorf("%s: global used = %d, want %d", bases[i], used[i], local.GlobalDemoLimit)
		}
	}
	if sum(spent) != admitted.Load() || admitted.Load()+sum(leased) != local.GlobalDemoLimit {
		t.Errorf("Regions spent %v (admitted %d) and hold %v leased: want spent == admitted and admitted + leased == %d",
			spent, admitted.Load(), leased, local.GlobalDemoLimit)
	}

	// The console's subject view of each Region shows the same three.
	t.Run("console", func(t *testing.T) {
		ctx := browser(t, 60*time.Second)
		for i, base := range bases {
			drive(t, ctx, "subject view of "+base,
				chromedp.Navigate(base+"/console/#token="+token),
				chromedp.WaitVisible(css(`#rules tbody tr[data-id]`)),
				chromedp.Navigate(base+"/console/#/subject?s="+local.GlobalDemoSubject+"&api=demo"),
				chromedp.WaitVisible(css(`#limits td[data-global-used]`)))
			got := js[[]string](t, ctx, `[...document.querySelectorAll('#limits td[data-global-used], #limits td[data-region-used], #limits td[data-leased]')].map(td => td.textContent)`)
			want := []string{fmt.Sprint(used[i]), fmt.Sprint(spent[i]), fmt.Sprint(leased[i])}
			if !slices.Equal(got, want) {
				t.Errorf("console of %s: global used, this Region, leased unspent = %q, want %q", base, got, want)
			}
		}
	})

	// A rule written once, through local-2, reaches local-3's Redis.
	regionCLI(t, bases[1], token, "rules", "put", "--api", "demo", "--route", "*", "--subject", "late", "--limit", "0", "--period", "1m")
	testenv.Await(t, 10*time.Second, 50*time.Millisecond, fmt.Sprintf("a rule blocking late, put through %s, enforced by %s", bases[1], bases[2]), func() bool {
		return hello(t, bases[2], "late") == http.StatusTooManyRequests
	})
}

// globalView reads the demo subject's global quota through the built
// CLI against one Region, in JSON and as the table: the global used, this
// Region's share and what it holds leased unspent. Once settled (no
// refill can be under way), the table must show the same three.
func globalView(t *testing.T, base, token string, settled bool) (used, here, leased int64) {
	t.Helper()
	var l admin.SubjectLimitsResponse
	if err := json.Unmarshal([]byte(regionCLI(t, base, token, "-o", "json", "subjects", "limits", local.GlobalDemoSubject, "--api", "demo")), &l); err != nil {
		t.Fatal(err)
	}
	var g *admin.BucketLimit
	for i := range l.Limits {
		if l.Limits[i].Global != nil {
			g = &l.Limits[i]
		}
	}
	if g == nil || g.Global.Used == nil || g.Global.Leased == nil || g.Used == nil {
		t.Fatalf("subject view of %s = %+v, want a global quota with used, leased and this Region's used", base, l.Limits)
	}
	if !settled {
		return *g.Global.Used, *g.Used, *g.Global.Leased // a refill may be under way
	}
	table := regionCLI(t, base, token, "subjects", "limits", local.GlobalDemoSubject, "--api", "demo")
	want := fmt.Sprintf("used %d of %d, this Region %d, leased unspent %d", *g.Global.Used, local.GlobalDemoLimit, *g.Used, *g.Global.Leased)
	if !strings.Contains(table, "GLOBAL") || !strings.Contains(table, want) {
		t.Errorf("sluice subjects limits against %s =\n%s\nwant a GLOBAL column with %q", base, table, want)
	}
	return *g.Global.Used, *g.Used, *g.Global.Leased
}

func sum(xs []int64) (s int64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// TestLocalRegionsNoLedger: without --ledger-url and with no dynalite to
// be found, sluice local --regions says how to get one.
func TestLocalRegionsNoLedger(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(sluiceBin, "local", "--regions", "2", "--addr", "127.0.0.1:0")
	cmd.Dir = t.TempDir() // no .cache/dynalite here
	cmd.Env = append(os.Environ(), "SLUICE_DYNALITE=", "REDIS_URL=", "DATABASE_URL=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "scripts/dynalite.sh") || !strings.Contains(string(out), "--ledger-url") {
		t.Errorf("sluice local --regions 2 without dynalite = %v:\n%s\nwant a failure naming scripts/dynalite.sh and --ledger-url", err, out)
	}
	cmd = exec.Command(sluiceBin, "local", "--regions", "6")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), "1 to 5") {
		t.Errorf("sluice local --regions 6 = %v:\n%s\nwant usage error exit 2 naming 1 to 5", err, out)
	}
}
