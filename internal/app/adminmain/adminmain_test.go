package adminmain_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
)

// TestRunFailsNamingTheFunction runs Run as a Lambda would start it, in a
// process of its own (this test binary again), with a configuration it
// must refuse: it exits 1, and its one line names the function and the
// variable, which is what the Lambda console shows as the init error.
func TestRunFailsNamingTheFunction(t *testing.T) {
	if os.Getenv("SLUICE_ADMINMAIN_CHILD") == "1" {
		adminmain.Run("admin-test", app.Read, admin.RouteListRules, nil)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunFailsNamingTheFunction$")
	cmd.Env = append(os.Environ(), "SLUICE_ADMINMAIN_CHILD=1", "DEFAULT_LIMIT=lots")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("Run with DEFAULT_LIMIT=lots: %v, want exit status 1\n%s", err, out)
	}
	if s := string(out); !strings.HasPrefix(s, "admin-test: configuration: ") || !strings.Contains(s, "DEFAULT_LIMIT") {
		t.Errorf("Run's output = %q, want one line naming admin-test and DEFAULT_LIMIT", s)
	}
}

// TestOnlyInsightsMainsLinkCloudWatch: of the admin mains, only those that
// pass a Contributor Insights reader link the CloudWatch SDK (adminmain
// itself does not import it), so the other functions' packages stay small.
func TestOnlyInsightsMainsLinkCloudWatch(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "../../../functions/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	readers := map[string]bool{"admin-stats": true, "admin-subjects-find": true}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, deps, _ := strings.Cut(line, " ")
		name := path[strings.LastIndex(path, "/")+1:]
		if !strings.HasPrefix(name, "admin-") {
			continue
		}
		seen++
		if links := strings.Contains(deps, "service/cloudwatch"); links != readers[name] {
			t.Errorf("functions/%s links the CloudWatch SDK: %v, want %v", name, links, readers[name])
		}
	}
	if seen < 17 {
		t.Errorf("go list found %d admin mains, want 17", seen)
	}
}
