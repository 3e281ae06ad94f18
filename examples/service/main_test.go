package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeSnippetIsThisProgram keeps README.md's "Not behind API
// Gateway?" snippet compiled: each of its lines is a line of this program,
// in order, and it stays at most 10 lines.
func TestReadmeSnippetIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Not behind API Gateway?")
	if !ok {
		t.Fatal(`README.md has no "## Not behind API Gateway?" section`)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the section has no ```go block")
	}
	code, _, _ = strings.Cut(code, "```")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	prog := strings.Split(string(src), "\n")
	lines := strings.Split(strings.TrimSuffix(code, "\n"), "\n")
	if len(lines) > 10 {
		t.Errorf("the snippet has %d lines, want at most 10", len(lines))
	}
	next := 0
	for _, line := range lines {
		found := false
		for ; next < len(prog); next++ {
			if strings.TrimSpace(prog[next]) == strings.TrimSpace(line) {
				found, next = true, next+1
				break
			}
		}
		if !found {
			t.Fatalf("README snippet line %q is not in examples/service/main.go (in order); keep the two in step", line)
		}
	}
}
