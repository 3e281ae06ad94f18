package adminmain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/store/memory"
)

// TestRunFailsNamingTheFunction runs Run as a Lambda would start it, in a
// process of its own (this test binary again), with a configuration it
// must refuse: it exits 1, and its one line names the function and the
// variable, which is what the Lambda console shows as the init error.
func TestRunFailsNamingTheFunction(t *testing.T) {
	if os.Getenv("SLUICE_ADMINMAIN_CHILD") == "1" {
		adminmain.Run("admin-test", app.AdminRead, nil)
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

// classRoutes lists the routes of each admin function, from the route
// table.
func classRoutes() map[string][]string {
	m := map[string][]string{}
	for _, r := range admin.Routes() {
		m[r.Function] = append(m[r.Function], r.Name)
	}
	return m
}

// TestHandlerServesOnlyItsRoutes: a function answers the events of its own
// routes through their handlers, and an event for any other route (a
// write sent to the read function, the stats route to the write function)
// gets a 404 problem naming the function and runs nothing: the store is
// not written, and the error is logged.
func TestHandlerServesOnlyItsRoutes(t *testing.T) {
	t.Parallel()
	cfg, err := config.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New()
	var out bytes.Buffer
	a, err := app.NewAdmin(context.Background(), cfg, app.AdminRead, app.Options{Store: st, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	h := adminmain.Handler(a, admin.FunctionRead)
	proxy := func(method, resource, path, body string) events.APIGatewayProxyResponse {
		ev := events.APIGatewayProxyRequest{HTTPMethod: method, Resource: resource, Path: path, Body: body,
			Headers: map[string]string{"Content-Type": "application/json"}}
		if rest, ok := strings.CutPrefix(path, "/rules/"); ok {
			ev.PathParameters = map[string]string{"id": strings.TrimSuffix(rest, "/history")}
		}
		resp, err := h(context.Background(), ev)
		if err != nil {
			t.Fatalf("%s %s: error %v, want a response", method, path, err)
		}
		return resp
	}

	for _, tt := range []struct{ method, resource, path string }{
		{"GET", "/rules", "/rules"},
		{"GET", "/plans", "/plans"},
	} {
		if resp := proxy(tt.method, tt.resource, tt.path, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s = %d %s, want 200", tt.method, tt.path, resp.StatusCode, resp.Body)
		}
	}
	if resp := proxy("GET", "/rules/{id}", "/rules/r1", ""); resp.StatusCode != http.StatusNotFound ||
		!strings.Contains(resp.Body, "rule") || strings.Contains(resp.Body, admin.FunctionRead) {
		t.Errorf("GET /rules/r1 = %d %s, want the route's own 404 (no such rule)", resp.StatusCode, resp.Body)
	}

	for _, tt := range []struct{ method, resource, path, body string }{
		{"POST", "/rules", "/rules", `{"api":"*","route":"*","subject":"*","limit":1,"period":"1m"}`},
		{"DELETE", "/rules/{id}", "/rules/r1", ""},
		{"GET", "/stats", "/stats", ""},
		{"POST", "/usage", "/usage", `{}`},
		{"GET", "/{proxy+}", "/rules", ""},
	} {
		resp := proxy(tt.method, tt.resource, tt.path, tt.body)
		var p httpapi.Problem
		if err := json.Unmarshal([]byte(resp.Body), &p); err != nil || resp.StatusCode != http.StatusNotFound ||
			resp.Headers["Content-Type"] != "application/problem+json" || p.Status != http.StatusNotFound ||
			!strings.Contains(p.Detail, admin.FunctionRead) || !strings.Contains(p.Detail, tt.method+" "+tt.resource) {
			t.Errorf("%s %s to %s = %d %v %s; want a 404 problem naming the function and the route",
				tt.method, tt.resource, admin.FunctionRead, resp.StatusCode, resp.Headers, resp.Body)
		}
	}
	if set, err := st.LoadAll(context.Background()); err != nil || len(set.Rules) != 0 {
		t.Errorf("rules after a misrouted POST /rules = %v, %v; want none", set, err)
	}
	if n := strings.Count(out.String(), "does not serve"); n != 5 {
		t.Errorf("log has %d lines about a route not served, want 5:\n%s", n, out.String())
	}
}

// TestStatsHandler: the stats function answers both its routes from the
// Stats part (no store, no Redis) and refuses a rule read.
func TestStatsHandler(t *testing.T) {
	t.Parallel()
	cfg, err := config.FromEnv(func(k string) string {
		if k == "SUBJECT_HMAC_KEY" {
			return "deployment-key-0123456789abcdef"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	a, err := app.NewAdmin(context.Background(), cfg, app.AdminStats, app.Options{StatsReader: stats.New(stats.Options{}), Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	h := adminmain.Handler(a, admin.FunctionStats)
	for _, tt := range []struct {
		ev   events.APIGatewayProxyRequest
		want int
	}{
		{events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/stats", Path: "/stats"}, http.StatusOK},
		{events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/subjects/find", Path: "/subjects/find",
			Body: `{"subject":"customer-42"}`, Headers: map[string]string{"Content-Type": "application/json"}}, http.StatusOK},
		{events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/rules", Path: "/rules"}, http.StatusNotFound},
	} {
		resp, err := h(context.Background(), tt.ev)
		if err != nil || resp.StatusCode != tt.want {
			t.Errorf("%s %s = %d %s, %v; want %d", tt.ev.HTTPMethod, tt.ev.Resource, resp.StatusCode, resp.Body, err, tt.want)
		}
	}
}

// TestOnlyInsightsMainsLinkCloudWatch: of the admin mains, only the one
// that passes a Contributor Insights reader links the CloudWatch SDK
// (adminmain itself does not import it), so the other functions'
// packages stay small.
func TestOnlyInsightsMainsLinkCloudWatch(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "../../../functions/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	readers := map[string]bool{admin.FunctionStats: true}
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
	if want := len(classRoutes()); seen != want {
		t.Errorf("go list found %d admin mains, want %d (one per function of admin.Routes)", seen, want)
	}
}
