package internal_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// The manual's budget (issue 36): growth past it is a decision, made by
// changing a number here, not a drift.
const (
	// maxMarkdown is every .md of the repository, in bytes, the CLI and
	// environment references (generated) and quickstart.md's programs
	// (compiled) included: issue 36's 150 KB.
	maxMarkdown     = 150_000
	maxREADME       = 12 << 10
	maxDoc          = 25 << 10 // any one document
	maxArchitecture = 12 << 10 // docs/ARCHITECTURE.md: the map, not its history
)

// markdown returns the repository's Markdown files (relative to the module
// root) and their sizes, skipping hidden, generated and vendored trees.
func markdown(t *testing.T) map[string]int {
	t.Helper()
	files := map[string]int{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != ".." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			slices.Contains([]string{"node_modules", "build", "cdk.out", "testdata"}, name)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("..", path)
			files[filepath.ToSlash(rel)] = int(info.Size())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestDocSizes fails when the Markdown outgrows the budget above.
func TestDocSizes(t *testing.T) {
	files := markdown(t)
	total := 0
	for path, n := range files {
		total += n
		limit := maxDoc
		switch path {
		case "README.md":
			limit = maxREADME
		case "docs/ARCHITECTURE.md":
			limit = maxArchitecture
		}
		if n > limit {
			t.Errorf("%s is %d bytes, over its %d: say what holds now, and leave the history to git log", path, n, limit)
		}
	}
	if total > maxMarkdown {
		t.Errorf("the Markdown adds up to %d bytes, over %d: %s", total, maxMarkdown, largest(files))
	}
	t.Logf("%d Markdown files, %d bytes", len(files), total)
}

func largest(files map[string]int) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.SortFunc(paths, func(a, b string) int { return files[b] - files[a] })
	var out []string
	for _, p := range paths[:min(5, len(paths))] {
		out = append(out, fmt.Sprintf("%s %d", p, files[p]))
	}
	return "largest: " + strings.Join(out, ", ")
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#{1,6} +(.+)$`)
	anchor  = regexp.MustCompile(`<a id="([^"]+)"></a>`)
)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped,
// spaces turned into hyphens.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TestDocLinks fails on a relative link between the documents that leads
// nowhere: a missing file, or a #fragment that is no heading or anchor of
// its target.
func TestDocLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
			a[slug(m[1])] = true
		}
		for _, m := range anchor.FindAllStringSubmatch(string(b), -1) {
			a[m[1]] = true
		}
		anchors[path] = a
		return a
	}
	for path := range markdown(t) {
		b, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, frag, _ := strings.Cut(link, "#")
			file := path
			if target != "" {
				file = filepath.ToSlash(filepath.Join(filepath.Dir(path), target))
			}
			if _, err := os.Stat(filepath.Join("..", file)); err != nil {
				t.Errorf("%s links to %s: no such file", path, link)
				continue
			}
			if frag != "" && strings.HasSuffix(file, ".md") && !anchorsOf(file)[frag] {
				t.Errorf("%s links to %s: %s has no heading or anchor %q", path, link, file, frag)
			}
		}
	}
}
