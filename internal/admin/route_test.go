package admin_test

import (
	"regexp"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
)

// functionName is what a route's function may be called: it is a directory
// under functions/, a `make build` target and, through infra's LogicalName,
// a CloudFormation logical id.
var functionName = regexp.MustCompile(`^admin(-[a-z0-9]+)+$`)

func TestRoutes(t *testing.T) {
	t.Parallel()
	routes := admin.Routes()
	if len(routes) == 0 {
		t.Fatal("Routes() is empty")
	}
	names, functions := map[string]bool{}, map[string]bool{}
	for _, r := range routes {
		if got := r.Method + " " + r.Resource; got != r.Name {
			t.Errorf("route %q: Method + Resource = %q, want the name", r.Name, got)
		}
		if !functionName.MatchString(r.Function) {
			t.Errorf("route %q: Function = %q, want it to match %s", r.Name, r.Function, functionName)
		}
		if names[r.Name] {
			t.Errorf("route %q is listed twice", r.Name)
		}
		names[r.Name], functions[r.Function] = true, true
	}
	// Four functions, one per privilege class, each serving some route.
	classes := []string{admin.FunctionRead, admin.FunctionWrite, admin.FunctionSubjects, admin.FunctionStats}
	for _, c := range classes {
		if !functions[c] {
			t.Errorf("function %s serves no route", c)
		}
		delete(functions, c)
	}
	for f := range functions {
		t.Errorf("function %q is no privilege class (want one of %v)", f, classes)
	}
	// The slice is a copy: changing it changes no route.
	routes[0].Function = "changed"
	if got := admin.Routes()[0].Function; got == "changed" {
		t.Error("Routes() returns the table itself, want a copy")
	}
}
