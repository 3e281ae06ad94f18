package admin_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/httpapi"
)

var update = flag.Bool("update", false, "rewrite docs/admin-api.md's route table from openapi.yaml")

const adminDoc = "../../docs/admin-api.md"

// commonStatuses are the problems nearly every operation may answer: the
// route table leaves them to the Errors section.
var commonStatuses = []string{"400", "401", "403", "413", "415", "500", "503"}

// routeTable renders docs/admin-api.md's route table from the document:
// each operation in the route table's order (POST /check last), its query
// parameters, its summary, its successes and its own problems.
func routeTable(doc *openapi3.T) string {
	var b strings.Builder
	b.WriteString("| route | does | answers |\n| --- | --- | --- |\n")
	names := []string{}
	for _, r := range admin.Routes() {
		names = append(names, r.Name)
	}
	for _, name := range append(names, "POST /check") {
		method, path, _ := strings.Cut(name, " ")
		op := doc.Paths.Find(path).GetOperation(method)
		var query []string
		for _, p := range op.Parameters {
			if p.Value.In == "query" {
				query = append(query, p.Value.Name+"=")
			}
		}
		route := name
		if len(query) > 0 {
			route += "?" + strings.Join(query, "&")
		}
		var ok, own []string
		for code := range op.Responses.Map() {
			switch {
			case code < "400":
				ok = append(ok, "`"+code+"`")
			case !slices.Contains(commonStatuses, code):
				own = append(own, "`"+code+"`")
			}
		}
		slices.Sort(ok)
		slices.Sort(own)
		answers := strings.Join(ok, ", ")
		if len(own) > 0 {
			answers += "; " + strings.Join(own, ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", route, op.Summary, answers)
	}
	return b.String()
}

// TestAdminDocMatchesSpec keeps docs/admin-api.md and openapi.yaml from
// drifting: the route table is rendered from the document (go test
// -update rewrites it), the rule field table names the document's rule
// fields, and the Errors section explains every problem status the
// document answers.
func TestAdminDocMatchesSpec(t *testing.T) {
	doc, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(adminDoc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	const begin, end = "<!-- routes:begin -->\n", "<!-- routes:end -->"
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q block", adminDoc, begin, end)
	}
	want := routeTable(doc)
	if got := text[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile(adminDoc, []byte(text[:i+len(begin)]+want+text[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
		} else {
			t.Errorf("%s's route table differs from openapi.yaml; run go test ./internal/admin -run TestAdminDocMatchesSpec -update (-doc +spec):\n%s", adminDoc, cmp.Diff(got, want))
		}
	}

	// The rule field table: its first column's code spans.
	var fields []string
	inTable := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "| field | meaning |"):
			inTable = true
		case inTable && !strings.HasPrefix(line, "|"):
			inTable = false
		case inTable && !strings.HasPrefix(line, "| ---"):
			cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
			for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cell, -1) {
				fields = append(fields, m[1])
			}
		}
	}
	var spec []string
	for _, name := range []string{"RuleFields", "RuleInput"} {
		for p := range doc.Components.Schemas[name].Value.Properties {
			spec = append(spec, p)
		}
	}
	slices.Sort(fields)
	slices.Sort(spec)
	if diff := cmp.Diff(spec, fields); diff != "" {
		t.Errorf("%s's rule field table differs from openapi.yaml's RuleInput (-spec +doc):\n%s", adminDoc, diff)
	}

	// Every problem status has its anchor in Errors, as httpapi's type
	// URIs link there.
	for path, item := range doc.Paths.Map() {
		if path == "/check" { // its problem types are docs/authorizer.md's
			continue
		}
		for _, op := range item.Operations() {
			for code := range op.Responses.Map() {
				n, _ := strconv.Atoi(code)
				if n < 400 {
					continue
				}
				_, _, body := httpapi.Render(httpapi.TypeBase, &httpapi.Error{Status: n})
				var p httpapi.Problem
				json.Unmarshal(body, &p) //nolint:errcheck // Render's own
				slug := strings.TrimPrefix(p.Type, httpapi.TypeBase)
				if !strings.Contains(text, `<a id="`+slug+`"></a>`) {
					t.Errorf("%s answers %s, which %s's Errors table does not explain (no anchor %q)", op.OperationID, code, adminDoc, slug)
				}
			}
		}
	}
}
