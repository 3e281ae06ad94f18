package sluice_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadmeSnippetIsTheExample keeps the "Attach Sluice to your own API"
// snippet of README.md (docs/deploy.md links to it) and Example (which
// runs) the same code: every line of a snippet must appear, in order, in example_test.go,
// and their statements must be the same, so a line dropped from either side
// fails too. Only the Example sets AssetDir (a prebuilt stand-in, so that it
// runs without a build), and a snippet ends with app.Synth where the Example
// inspects the template. A snippet's imports are named in the prose around
// it, so that it stays at most 15 lines of Go.
func TestReadmeSnippetIsTheExample(t *testing.T) {
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md"} {
		t.Run(doc, func(t *testing.T) { checkSnippet(t, doc, string(example)) })
	}
}

func checkSnippet(t *testing.T, doc, example string) {
	readme, err := os.ReadFile("../../" + doc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Attach Sluice to your own API")
	if !ok {
		t.Fatalf(`%s has no "## Attach Sluice to your own API" section`, doc)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatalf("the %s section has no ```go block", doc)
	}
	code, _, _ = strings.Cut(code, "```")

	want := strings.Split(example, "\n")
	next := 0
	for _, line := range codeLines(code) {
		found := false
		for ; next < len(want); next++ {
			if strings.TrimSpace(assetDir.ReplaceAllString(want[next], "")) == line {
				found, next = true, next+1
				break
			}
		}
		if !found {
			t.Fatalf("%s snippet line %q is not in example_test.go (in order); keep the two in step", doc, line)
		}
	}

	n := 0
	for _, line := range strings.Split(code, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	if n > 15 {
		t.Errorf("%s snippet has %d lines of Go, want at most 15", doc, n)
	}
	// The statements: the Example's body up to where it inspects the
	// template.
	_, body, _ := strings.Cut(example, "func Example() {\n")
	body, _, _ = strings.Cut(body, "template := app.Synth(nil)")
	if diff := cmp.Diff(codeLines(body), codeLines(code)); diff != "" {
		t.Errorf("%s snippet statements differ from Example's (-example +%s):\n%s", doc, doc, diff)
	}
}

// assetDir is the Example's AssetDir field, which the docs leave out.
var assetDir = regexp.MustCompile(`AssetDir: "[^"]*", `)

// codeLines returns the trimmed lines of code that the README and the
// Example must share: no blank lines, no AssetDir, no final app.Synth.
func codeLines(code string) []string {
	var out []string
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(assetDir.ReplaceAllString(line, ""))
		if line == "" || strings.HasPrefix(line, "AssetDir:") || line == "app.Synth(nil)" {
			continue
		}
		out = append(out, line)
	}
	return out
}
