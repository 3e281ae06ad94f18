package sluice_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeSnippetIsTheExample keeps the README's "Attach Sluice to your
// own API" snippet and Example (which runs) the same code: every line of the
// snippet must appear, in order, in example_test.go. The asset directory
// differs (the README points at `make build` output, the Example at
// testdata), and the snippet ends with app.Synth where the Example inspects
// the template.
func TestReadmeSnippetIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Attach Sluice to your own API")
	if !ok {
		t.Fatal(`README.md has no "## Attach Sluice to your own API" section`)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the README section has no ```go block")
	}
	code, _, _ = strings.Cut(code, "```")

	want := strings.Split(string(example), "\n")
	next := 0
	for _, line := range strings.Split(code, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "AssetDir:") || line == "app.Synth(nil)" {
			continue
		}
		found := false
		for ; next < len(want); next++ {
			if strings.TrimSpace(want[next]) == line {
				found, next = true, next+1
				break
			}
		}
		if !found {
			t.Fatalf("README snippet line %q is not in example_test.go (in order); keep the two in step", line)
		}
	}
}
