// Package internal_test holds the one test of who may import what. Its
// rules are not here: they are the package table of docs/ARCHITECTURE.md,
// read at test time (in the spirit of tailscale's tstest/deptest, with the
// map a reader sees being the map the test enforces).
package internal_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice/"

// archDoc is the map, relative to this file's directory.
const archDoc = "../docs/ARCHITECTURE.md"

// row is one package of the table: what it may import, and whether it is
// domain code, which must not depend on Lambda or AWS even indirectly.
type row struct {
	pkg     string   // module-relative path; "functions/*" stands for every function
	allowed []string // module packages by exact path, outside modules by prefix
	domain  bool
	line    int // in archDoc, for messages
}

// readTable parses the rows between <!-- deps:begin --> and
// <!-- deps:end --> of the document: markdown table rows
//
//	| `pkg` | what it holds | `a`, `b` or — | domain or empty |
//
// The third cell lists the allowed imports as code spans, nothing else
// ("—" for none); the fourth is "domain" or empty. Anything else is an
// error, so a typo cannot silently allow or forbid an import.
func readTable(r *bufio.Scanner) ([]row, error) {
	var (
		rows   []row
		inside bool
		errs   []string
		n      int
		seen   = map[string]int{}
	)
	for r.Scan() {
		n++
		line := strings.TrimSpace(r.Text())
		switch {
		case line == "<!-- deps:begin -->":
			inside = true
			continue
		case line == "<!-- deps:end -->":
			inside = false
			continue
		case !inside || !strings.HasPrefix(line, "|"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) != 4 {
			errs = append(errs, fmt.Sprintf("line %d: %d cells, want 4 (package, holds, may import, domain)", n, len(cells)))
			continue
		}
		if cells[0] == "package" || strings.HasPrefix(cells[0], "---") {
			continue // the header and its rule
		}
		pkg, ok := codeSpan(cells[0])
		if !ok {
			errs = append(errs, fmt.Sprintf("line %d: package cell %q is not one `path`", n, cells[0]))
			continue
		}
		if prev, dup := seen[pkg]; dup {
			errs = append(errs, fmt.Sprintf("line %d: %s already has a row at line %d", n, pkg, prev))
			continue
		}
		seen[pkg] = n
		rw := row{pkg: pkg, line: n}
		if cells[2] != "—" {
			for item := range strings.SplitSeq(cells[2], ",") {
				a, ok := codeSpan(strings.TrimSpace(item))
				if !ok {
					errs = append(errs, fmt.Sprintf("line %d: may-import entry %q is not a `path`", n, strings.TrimSpace(item)))
					continue
				}
				rw.allowed = append(rw.allowed, a)
			}
		}
		switch cells[3] {
		case "domain":
			rw.domain = true
		case "":
		default:
			errs = append(errs, fmt.Sprintf("line %d: last cell %q is neither \"domain\" nor empty", n, cells[3]))
		}
		rows = append(rows, rw)
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		errs = append(errs, "no rows between <!-- deps:begin --> and <!-- deps:end -->")
	}
	if len(errs) > 0 {
		return rows, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return rows, nil
}

// codeSpan returns s without its backquotes when s is exactly one code span.
func codeSpan(s string) (string, bool) {
	inner, ok := strings.CutPrefix(s, "`")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, "`")
	if !ok || inner == "" || strings.ContainsAny(inner, "` ") {
		return "", false
	}
	return inner, true
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
}

func TestImports(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.FromSlash(archDoc))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	table, err := readTable(bufio.NewScanner(f))
	if err != nil {
		t.Fatalf("%s: %v", archDoc, err)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-json=ImportPath,Imports,Deps,Standard", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		if rel, ok := strings.CutPrefix(p.ImportPath, module); ok && !p.Standard {
			pkgs[rel] = p
		}
	}
	for _, msg := range check(table, pkgs) {
		t.Error(msg)
	}
}

// check returns every way pkgs disagree with the table: a package without
// a row, an import its row does not allow, a row naming no package, an
// allowance no import of its package(s) uses, a domain package depending
// on an AWS module.
func check(table []row, pkgs map[string]listed) []string {
	var msgs []string
	rows := map[string]row{}
	for _, r := range table {
		rows[r.pkg] = r
	}
	key := func(rel string) string {
		if strings.HasPrefix(rel, "functions/") {
			return "functions/*"
		}
		return rel
	}
	used := map[string]map[string]bool{} // row → allowance → used
	rels := make([]string, 0, len(pkgs))
	for rel := range pkgs {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	for _, rel := range rels {
		p := pkgs[rel]
		r, ok := rows[key(rel)]
		if !ok {
			msgs = append(msgs, fmt.Sprintf("%s has no row in %s's package table: add one with what it holds and may import", rel, archDoc))
			continue
		}
		if used[r.pkg] == nil {
			used[r.pkg] = map[string]bool{}
		}
		for _, imp := range p.Imports {
			if !hostPath(imp) && !strings.HasPrefix(imp, module) || imp == p.ImportPath {
				continue // the standard library
			}
			target := strings.TrimPrefix(imp, module)
			i := slices.IndexFunc(r.allowed, func(a string) bool { return allows(a, target) })
			if i < 0 {
				msgs = append(msgs, fmt.Sprintf("%s imports %s, which its row (%s:%d) does not allow", rel, target, archDoc, r.line))
				continue
			}
			used[r.pkg][r.allowed[i]] = true
		}
		if r.domain {
			for _, dep := range p.Deps {
				if strings.HasPrefix(dep, "github.com/aws/") {
					msgs = append(msgs, fmt.Sprintf("%s depends on %s; it is domain code (%s:%d): Lambda and AWS belong in the adapters, app and functions", rel, dep, archDoc, r.line))
				}
			}
		}
	}
	for _, r := range table {
		if used[r.pkg] == nil {
			msgs = append(msgs, fmt.Sprintf("%s:%d names %s, which is no package of the module", archDoc, r.line, r.pkg))
			continue
		}
		for _, a := range r.allowed {
			if !used[r.pkg][a] {
				msgs = append(msgs, fmt.Sprintf("%s:%d allows %s to import %s, which no import uses: remove the allowance", archDoc, r.line, r.pkg, a))
			}
		}
	}
	return msgs
}

// hostPath reports whether an import path starts with a host name, as
// outside modules do and the standard library and module-relative paths
// don't.
func hostPath(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}

// allows reports whether the table entry a admits the import target: a
// package of this module only by its exact path; an outside module with
// its packages ("github.com/jackc/pgx/v5" admits .../pgxpool); an entry
// ending in "/" everything below it.
func allows(a, target string) bool {
	switch {
	case !hostPath(a):
		return target == a
	case strings.HasSuffix(a, "/"):
		return strings.HasPrefix(target, a)
	}
	return target == a || strings.HasPrefix(target, a+"/")
}

// TestCheck proves check fails each way it should, on a tiny made-up
// module, so a broken check cannot pass the real tree by accident.
func TestCheck(t *testing.T) {
	t.Parallel()
	doc := "intro\n<!-- deps:begin -->\n" +
		"| package | holds | may import | domain |\n| --- | --- | --- | --- |\n" +
		"| `functions/*` | mains | `internal/app`, `github.com/aws/aws-lambda-go/lambda` | |\n" +
		"| `internal/app` | wiring | `internal/rules`, `internal/limiter` | |\n" +
		"| `internal/rules` | rules | — | domain |\n" +
		"| `internal/gone` | nothing | — | |\n" +
		"<!-- deps:end -->\n| `outside` | ignored | — | |\n"
	table, err := readTable(bufio.NewScanner(strings.NewReader(doc)))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]listed{
		"functions/a":    {ImportPath: module + "functions/a", Imports: []string{module + "internal/app", "github.com/aws/aws-lambda-go/lambda", "os"}},
		"functions/b":    {ImportPath: module + "functions/b", Imports: []string{module + "internal/rules"}},
		"internal/app":   {ImportPath: module + "internal/app", Imports: []string{module + "internal/rules"}},
		"internal/rules": {ImportPath: module + "internal/rules", Deps: []string{"github.com/aws/smithy-go"}},
		"internal/new":   {ImportPath: module + "internal/new"},
	}
	got := check(table, pkgs)
	want := []string{
		"functions/b imports internal/rules, which its row",
		"internal/rules depends on github.com/aws/smithy-go",
		"internal/new has no row",
		"names internal/gone, which is no package",
		"allows internal/app to import internal/limiter, which no import uses",
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, w) }) {
			t.Errorf("check(...) misses %q; got:\n%s", w, strings.Join(got, "\n"))
		}
	}
	if len(got) != len(want) {
		t.Errorf("check(...) = %d messages, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}

	for _, bad := range []string{
		"| `a` | x | internal/b | |",           // an allowance without backquotes
		"| a | x | — | |",                      // a package without backquotes
		"| `a` | x | — | maybe |",              // an unknown last cell
		"| `a` | x | — |",                      // a missing cell
		"| `a` | x | — | |\n| `a` | y | — | |", // a duplicate row
	} {
		if _, err := readTable(bufio.NewScanner(strings.NewReader("<!-- deps:begin -->\n" + bad + "\n<!-- deps:end -->"))); err == nil {
			t.Errorf("readTable(%q) = nil error, want one", bad)
		}
	}
}
