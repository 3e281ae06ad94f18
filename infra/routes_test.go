package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/admin"
)

// The admin route table in internal/admin is the one list of admin routes.
// These tests fail when the functions/ directories, their mains or the
// synthesized admin API disagree with it.

const (
	functionsDir = "../functions" // one directory per Lambda, `make build` builds each
)

// checkRoute is the one admin API method that is not an admin route.
const checkRoute = "POST /check → check"

func TestAdminFunctionsMatchRoutes(t *testing.T) {
	routed := map[string]bool{}
	for _, r := range admin.Routes() {
		routed[r.Function] = true
		if _, err := os.Stat(filepath.Join(functionsDir, r.Function, "main.go")); err != nil {
			t.Errorf("route %q is served by function %s, but it has no main: %v", r.Name, r.Function, err)
		}
	}
	dirs, err := filepath.Glob(filepath.Join(functionsDir, "admin-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatalf("no %s/admin-* directories; is the test running in infra/?", functionsDir)
	}
	for _, d := range dirs {
		if name := filepath.Base(d); !routed[name] {
			t.Errorf("functions/%s serves no admin route: want lines for it in the table in internal/admin/routes.go", name)
		}
	}
}

// TestFunctionsMatchDirectories checks sluice.Functions, what the stack
// deploys, against functions/, what `make build` builds.
func TestFunctionsMatchDirectories(t *testing.T) {
	entries, err := os.ReadDir(functionsDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	want := slices.Sorted(slices.Values(sluice.Functions))
	if diff := cmp.Diff(want, dirs); diff != "" {
		t.Errorf("functions/ directories differ from sluice.Functions (-Functions +directories):\n%s", diff)
	}
}

// TestAdminAPIMatchesRoutes reads the admin RestApi back from each
// template: every method, as its resource path and HTTP method, must be
// an admin route integrated with that route's function (or the check
// method), and every route must be there.
func TestAdminAPIMatchesRoutes(t *testing.T) {
	want := []string{checkRoute}
	for _, r := range admin.Routes() {
		want = append(want, r.Name+" → "+r.Function)
	}
	slices.Sort(want)
	for _, v := range allVariants() {
		_, js := synth(t, v)
		got := adminMethods(t, js)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: admin API methods differ from admin.Routes (-routes +template):\n%s", v, diff)
		}
	}
}

// adminMethods lists the template's admin API methods as
// "METHOD /path → function", sorted.
func adminMethods(t *testing.T, js map[string]any) []string {
	t.Helper()
	apiID := logicalID(t, js, "AWS::ApiGateway::RestApi", "AdminApi")
	// A resource's parent is another resource (Ref) or the API's root
	// (Fn::GetAtt [api, RootResourceId]), which has path "".
	type node struct {
		parent any
		part   string
	}
	nodes := map[string]node{}
	for _, r := range resources(js, "AWS::ApiGateway::Resource") {
		if refersTo(r.Props["RestApiId"], apiID) {
			part, _ := r.Props["PathPart"].(string)
			nodes[r.ID] = node{r.Props["ParentId"], part}
		}
	}
	var path func(ref any, depth int) string
	path = func(ref any, depth int) string {
		m, _ := ref.(map[string]any)
		if att, ok := m["Fn::GetAtt"].([]any); ok && len(att) == 2 && att[0] == apiID && att[1] == "RootResourceId" {
			return ""
		}
		id, _ := m["Ref"].(string)
		n, ok := nodes[id]
		if !ok || depth > len(nodes) {
			t.Fatalf("admin API resource %v is neither the root nor a resource of the API", ref)
		}
		return path(n.parent, depth+1) + "/" + n.part
	}
	// NewFunction describes each function as "Sluice <name>", the name that
	// also picks its asset directory.
	names := map[string]string{}
	for _, r := range sluiceFunctions(js) {
		desc, _ := r.Props["Description"].(string)
		if name, ok := strings.CutPrefix(desc, "Sluice "); ok {
			names[r.ID] = name
		}
	}
	var methods []string
	for _, r := range resources(js, "AWS::ApiGateway::Method") {
		if !refersTo(r.Props["RestApiId"], apiID) {
			continue
		}
		in, _ := r.Props["Integration"].(map[string]any)
		if in["Type"] != "AWS_PROXY" {
			t.Errorf("admin method %s Integration.Type = %v, want AWS_PROXY", r.ID, in["Type"])
		}
		fns := functionRefs(in["Uri"], names)
		if len(fns) != 1 {
			t.Errorf("admin method %s integrates Sluice functions %v, want one", r.ID, fns)
			continue
		}
		p := path(r.Props["ResourceId"], 0)
		if p == "" {
			p = "/"
		}
		methods = append(methods, fmt.Sprintf("%v %s → %s", r.Props["HttpMethod"], p, fns[0]))
	}
	slices.Sort(methods)
	return methods
}

// functionRefs returns the names of the Sluice functions whose Arn v
// refers to (Fn::GetAtt [id, Arn]).
func functionRefs(v any, names map[string]string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if att, ok := v["Fn::GetAtt"].([]any); ok && len(att) == 2 && att[1] == "Arn" {
			if id, _ := att[0].(string); names[id] != "" {
				out = append(out, names[id])
			}
		}
		for _, x := range v {
			out = append(out, functionRefs(x, names)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, functionRefs(x, names)...)
		}
	}
	return out
}
