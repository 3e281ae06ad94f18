package main

import (
	"os"
	"strings"
	"testing"
)

// TestQuickstartIsThisProgram keeps docs/quickstart.md's HTTP API Lambda
// and this program the same: the section's first ```go block is this
// file from its package clause on, so the code the guide shows is the
// code this test compiles.
func TestQuickstartIsThisProgram(t *testing.T) {
	doc, err := os.ReadFile("../../docs/quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## HTTP API")
	if !ok {
		t.Fatal(`docs/quickstart.md has no "## HTTP API" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the HTTP API section has no ```go block")
	}
	block, _, _ = strings.Cut(block, "```\n")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, prog, _ := strings.Cut(string(src), "\npackage main\n")
	if prog = "package main\n" + prog; block != prog {
		t.Errorf("docs/quickstart.md's HTTP API block differs from examples/httpapi/main.go; keep the two the same.\nblock:\n%s\nmain.go:\n%s", block, prog)
	}
}
