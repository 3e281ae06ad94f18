package sluice_test

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// quickstartBlock is one ```go block of a document: its code and the line
// of the document its first line is on.
type quickstartBlock struct {
	code string
	line int
}

// goBlocks returns the ```go blocks of doc.
func goBlocks(doc string) []quickstartBlock {
	var (
		out []quickstartBlock
		cur *quickstartBlock
		b   strings.Builder
	)
	for i, line := range strings.Split(doc, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &quickstartBlock{line: i + 2}
			b.Reset()
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = b.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			b.WriteString(line + "\n")
		}
	}
	return out
}

// TestQuickstartCompiles keeps docs/quickstart.md's Go from drifting: every
// ```go block is a whole file, or one statement of the first whole file
// changed (splice), gofmt-formatted, and type-checks with go vet against
// this checkout. Each block becomes its own package in a temporary
// directory inside this module, so its imports of github.com/sluicehq/sluice
// resolve to the checkout as a `replace` would for a team's app. go vet
// compiles without linking, so the CDK apps cost seconds (the aws-cdk-go
// export data is in go's build cache from the package's other tests).
// An error is reported at its line of the document.
func TestQuickstartCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the guide's programs (tens of seconds): skipped with -short (make check)")
	}
	t.Parallel()
	const docPath = "../../docs/quickstart.md"
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(doc))
	// Step 2, Cognito (a statement of step 2's), and the wrapped
	// authorizer with its CDK app.
	if len(blocks) < 4 {
		t.Fatalf("docs/quickstart.md has %d ```go blocks, want at least 4", len(blocks))
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	// A name starting with "_" keeps the directory out of ./... patterns,
	// so a parallel `go vet ./...` or `go list ./...` never sees it.
	dir, err := os.MkdirTemp(".", "_quickstart")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	args := []string{"vet"}
	first := ""
	for i, b := range blocks {
		at := fmt.Sprintf("docs/quickstart.md:%d", b.line)
		switch {
		case strings.HasPrefix(b.code, "package "):
			if first == "" {
				first = b.code
			}
		case first == "":
			t.Errorf("%s: a Go block before the first whole file must be a whole file starting with its package clause", at)
			continue
		default:
			code, err := splice(first, b.code)
			if err != nil {
				t.Errorf("%s: a Go block is a whole file or a statement of the first one: %v", at, err)
				continue
			}
			b.code = code // go vet's lines in it are the spliced program's
		}
		if formatted, err := format.Source([]byte(b.code)); err != nil {
			t.Errorf("%s: %v", at, err)
		} else if !bytes.Equal(formatted, []byte(b.code)) {
			t.Errorf("%s: the block is not gofmt-formatted; gofmt gives:\n%s", at, formatted)
		}
		pkg := filepath.Join(dir, "block"+strconv.Itoa(i))
		if err := os.MkdirAll(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(b.code), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "./"+filepath.ToSlash(pkg))
	}
	if t.Failed() {
		return
	}
	cmd := exec.Command(goBin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("go vet of the quickstart's Go blocks: %v\n%s", err, atDocLines(string(out), dir, blocks))
	}
}

// splice returns program with the statement that starts at fragment's
// first line, through the next line equal to fragment's last, replaced by
// fragment: how the guide shows a variation of a program it showed whole.
func splice(program, fragment string) (string, error) {
	lines := strings.Split(strings.TrimSuffix(fragment, "\n"), "\n")
	first, last := lines[0]+"\n", lines[len(lines)-1]+"\n"
	i := strings.Index(program, first)
	for i > 0 && program[i-1] != '\n' {
		j := strings.Index(program[i+1:], first)
		if j < 0 {
			i = -1
			break
		}
		i += 1 + j
	}
	if i < 0 {
		return "", fmt.Errorf("no line %q to replace from", strings.TrimSpace(first))
	}
	end := i + len(first)
	if len(lines) > 1 {
		j := strings.Index(program[end-1:], "\n"+last)
		if j < 0 {
			return "", fmt.Errorf("no line %q after %q", strings.TrimSpace(last), strings.TrimSpace(first))
		}
		end += j - 1 + len("\n"+last)
	}
	return program[:i] + strings.TrimSuffix(fragment, "\n") + "\n" + program[end:], nil
}

// atDocLines rewrites go's "<dir>/blockN/main.go:L:C" positions in out as
// docs/quickstart.md lines.
func atDocLines(out, dir string, blocks []quickstartBlock) string {
	pos := regexp.MustCompile(regexp.QuoteMeta(filepath.Base(dir)) + `/block(\d+)/main\.go:(\d+)`)
	return pos.ReplaceAllStringFunc(out, func(m string) string {
		s := pos.FindStringSubmatch(m)
		i, _ := strconv.Atoi(s[1])
		l, _ := strconv.Atoi(s[2])
		return fmt.Sprintf("docs/quickstart.md:%d", blocks[i].line+l-1)
	})
}

func TestSplice(t *testing.T) {
	const program = "func main() {\n\ta := f(\n\t\t1,\n\t)\n\tb := g()\n}\n"
	for _, tc := range []struct {
		fragment, want string
		bad            bool
	}{
		{"\ta := f(\n\t\t2,\n\t\t3,\n\t)\n", "func main() {\n\ta := f(\n\t\t2,\n\t\t3,\n\t)\n\tb := g()\n}\n", false},
		{"\tb := g()\n", program, false}, // one line: first and last
		{"\tc := f(\n\t)\n", "", true},   // no such first line
		{"\ta := f(\n\t})\n", "", true},  // no such last line after it
		{"a := f(\n\t)\n", "", true},     // not a whole line of the program
	} {
		got, err := splice(program, tc.fragment)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("splice(%q) = %q, %v; want %q, error %v", tc.fragment, got, err, tc.want, tc.bad)
		}
	}
}
