package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/console"
)

// numberWords spells the counts the documents write in words.
var numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}

func spell(n int) string {
	if n >= 0 && n < len(numberWords) {
		return numberWords[n]
	}
	return fmt.Sprint(n)
}

// TestDocNumbers checks the numbers the documents state in prose against
// the code that knows them: the console's page weight, the seed's plans
// and rules, and the admin Lambdas. (The banner's curl lines are counted
// by TestReadmeTour, which has a banner.)
func TestDocNumbers(t *testing.T) {
	t.Parallel()
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile("../../" + path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(b)), " ") // prose wraps anywhere
	}
	size, err := console.Size()
	if err != nil {
		t.Fatal(err)
	}
	var seed struct {
		Plans []json.RawMessage `json:"plans"`
		Rules []json.RawMessage `json:"rules"`
	}
	raw, err := os.ReadFile("../../examples/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatalf("examples/rules.json: %v", err)
	}
	functions := map[string]bool{}
	for _, r := range admin.Routes() {
		functions[r.Function] = true
	}
	for _, tt := range []struct{ doc, want, what string }{
		{"docs/console.md", fmt.Sprintf("weighs %d KB", (size+500)/1000), fmt.Sprintf("the console's %d bytes (console.Size)", size)},
		{"docs/local.md", fmt.Sprintf("is %s plan and %s rules", spell(len(seed.Plans)), spell(len(seed.Rules))), "examples/rules.json"},
		{"README.md", fmt.Sprintf("%d admin Lambdas", len(functions)), "admin.Routes' functions"},
		{"docs/admin-api.md", fmt.Sprintf("served by %s Lambdas", spell(len(functions))), "admin.Routes' functions"},
		{"docs/ARCHITECTURE.md", strings.Join(sortedKeys(functions), ", "), "admin.Routes' functions"},
	} {
		if !strings.Contains(read(tt.doc), tt.want) {
			t.Errorf("%s does not say %q, which %s gives", tt.doc, tt.want, tt.what)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for _, k := range []string{admin.FunctionRead, admin.FunctionWrite, admin.FunctionSubjects, admin.FunctionStats} {
		if m[k] {
			out = append(out, k)
		}
	}
	if len(out) != len(m) {
		return []string{fmt.Sprintf("%d functions, not the four classes this test knows", len(m))}
	}
	return out
}
