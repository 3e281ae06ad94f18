package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	functionsDir = "../functions"      // one directory per Lambda, `make build` builds each
	adminDir     = "../internal/admin" // where the Route constants are declared
	adminPkg     = "github.com/sluicehq/sluice/internal/admin"
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

// TestAdminMainsNameTheirRoutes checks that each admin function's main
// mentions the Route constants of the routes the table gives it, and no
// other: whatever the wiring looks like, the constants it passes are the
// routes the function is deployed for, so a main cannot serve a route of
// another privilege class.
func TestAdminMainsNameTheirRoutes(t *testing.T) {
	consts := routeConstants(t)
	want := map[string][]string{}
	for _, r := range admin.Routes() {
		c, ok := consts[r.Name]
		if !ok {
			t.Errorf("route %q has no Route constant in %s", r.Name, adminDir)
			continue
		}
		want[r.Function] = append(want[r.Function], c)
	}
	for fn, cs := range want {
		file := filepath.Join(functionsDir, fn, "main.go")
		got, err := routeConstantsUsed(file)
		if err != nil {
			t.Errorf("function %s: %v", fn, err)
			continue
		}
		slices.Sort(cs)
		if diff := cmp.Diff(cs, got); diff != "" {
			t.Errorf("%s names other Route constants than the table gives %s (-table +main):\n%s", file, fn, diff)
		}
	}
}

// routeConstants maps each route name to the Route constant declared for it
// in internal/admin: "GET /rules/{id}" → "RouteGetRule".
func routeConstants(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(adminDir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, "Route") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatalf("%s: %s: %v", file, name.Name, err)
					}
					consts[v] = name.Name
				}
			}
		}
	}
	if len(consts) == 0 {
		t.Fatalf("no Route constants found in %s", adminDir)
	}
	return consts
}

// routeConstantsUsed returns the Route constants of internal/admin that
// the Go file refers to (comments aside), sorted, each once.
func routeConstantsUsed(file string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	pkg := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == adminPkg {
			pkg = "admin"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" {
		return nil, fmt.Errorf("%s does not import %s", file, adminPkg)
	}
	var used []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg && strings.HasPrefix(sel.Sel.Name, "Route") {
			used = append(used, sel.Sel.Name)
		}
		return true
	})
	slices.Sort(used)
	return slices.Compact(used), nil
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
