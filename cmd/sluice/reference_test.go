package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/cli.md's command reference from the command tree")

const (
	refBegin = "<!-- cli:begin (generated from the CLI: go test ./cmd/sluice -run TestCLIReference -update) -->\n"
	refEnd   = "<!-- cli:end -->"
)

// TestCLIReference fails when docs/cli.md's command reference is not
// what the command tree says; -update rewrites it.
func TestCLIReference(t *testing.T) {
	var c cli
	k, err := parser(&env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, &c, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeReference(&b, k)
	const path = "../../docs/cli.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(refBegin)), bytes.Index(doc, []byte(refEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no %q … %q block", path, refBegin, refEnd)
	}
	got := string(doc[i+len(refBegin) : j])
	if got == b.String() {
		return
	}
	if *update {
		out := append(append(append([]byte{}, doc[:i+len(refBegin)]...), b.Bytes()...), doc[j:]...)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's command reference differs from the CLI; run go test ./cmd/sluice -run TestCLIReference -update\nfirst difference near: %q",
		path, firstDiff(got, b.String()))
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return la[i] + " ≠ " + lb[i]
		}
	}
	return "the length"
}
