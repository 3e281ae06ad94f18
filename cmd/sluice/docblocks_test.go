package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docBase is the address the documents show; a test's own stack listens
// elsewhere.
const docBase = "http://127.0.0.1:8080"

// TestDocBlocks pastes the console blocks of the README, docs/local.md,
// docs/cli.md and docs/admin-api.md into a fresh `sluice local`, one stack per document (and
// one with --subject-sources jwt:sub for a "JWT subjects" section), in
// order, as a reader would: each `$ sluice …`, `$ curl …` and `$ for …;
// do curl …; done` line is run, and every output line under it must match
// a line it printed ("…" inside a line matches anything; a lone "…" ends
// the block's check). `make run` (TestReadmeTour checks the banner) and
// `export` lines are skipped; any other command fails the test, so a block
// cannot drift out of its reach unnoticed.
func TestDocBlocks(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../README.md", "../../docs/local.md", "../../docs/cli.md", "../../docs/admin-api.md"} {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path, "../../")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var plain, jwt *shell
			for _, b := range consoleBlocks(string(doc)) {
				var p *shell
				if b.section == "JWT subjects" {
					if jwt == nil {
						jwt = &shell{localProc: startLocal(t, nil, "--subject-sources", "jwt:sub"), vars: map[string]string{}}
					}
					p = jwt
				} else {
					if plain == nil {
						plain = &shell{localProc: startLocal(t, nil), vars: map[string]string{}}
					}
					p = plain
				}
				for _, c := range b.cmds {
					got, ok := p.paste(t, c.line)
					if !ok {
						continue
					}
					what := fmt.Sprintf("%s:%d `%s`", name, c.at, c.line)
					checkDocLines(t, what, c.want, strings.Split(got, "\n"))
				}
			}
		})
	}
}

// A docCmd is one `$ ` line of a console block (continuation lines
// joined), the line it starts on, and the output shown under it.
type docCmd struct {
	line string
	at   int
	want []string
}

type docBlock struct {
	section string // the nearest "## " heading above
	cmds    []docCmd
}

// consoleBlocks returns the ```console blocks of doc.
func consoleBlocks(doc string) []docBlock {
	var (
		out     []docBlock
		cur     *docBlock
		section string
		cont    bool
	)
	for i, l := range strings.Split(doc, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(l, "## "):
			section = strings.TrimPrefix(l, "## ")
		case cur == nil && l == "```console":
			out = append(out, docBlock{section: section})
			cur = &out[len(out)-1]
		case cur != nil && strings.HasPrefix(l, "```"):
			cur = nil
		case cur != nil && cont:
			c := &cur.cmds[len(cur.cmds)-1]
			c.line += " " + strings.TrimSpace(strings.TrimSuffix(l, `\`))
			cont = strings.HasSuffix(l, `\`)
		case cur != nil && strings.HasPrefix(l, "$ "):
			cur.cmds = append(cur.cmds, docCmd{line: strings.TrimSuffix(l[2:], `\`), at: i + 1})
			cont = strings.HasSuffix(l, `\`)
		case cur != nil && len(cur.cmds) > 0:
			c := &cur.cmds[len(cur.cmds)-1]
			c.want = append(c.want, l)
		}
	}
	return out
}

var (
	forLoop = regexp.MustCompile(`^for i in (.+?); do (.+); done(; echo)?$`)
	assign  = regexp.MustCompile(`^([A-Za-z_]+)=(.*)$`)
)

// A shell is a local stack and the variables a document's blocks set.
type shell struct {
	*localProc
	vars map[string]string
}

// paste runs one documented command line against p and returns what it
// prints, with p's address written as the documents' (ok false: a line
// that is not run, such as an export).
func (p *shell) paste(t *testing.T, line string) (string, bool) {
	t.Helper()
	line = strings.TrimSpace(line)
	if i := strings.Index(line, "   # "); i >= 0 {
		line = strings.TrimSpace(line[:i])
	}
	switch {
	case strings.HasPrefix(line, "export ") || line == "make run":
		return "", false
	case strings.HasPrefix(line, "sluice "):
		out, errOut, _ := p.cli(t, p.words(t, line)[1:]...)
		return strings.ReplaceAll(out+errOut, p.base, docBase), true
	case strings.HasPrefix(line, "curl "):
		return p.curl(t, p.words(t, line)[1:]), true
	case strings.HasPrefix(line, "sleep "):
		// What the document waits for (a token's expiry) is seconds
		// inside a bound of 30 s: no race to lose.
		n, err := strconv.Atoi(strings.TrimPrefix(line, "sleep "))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		time.Sleep(time.Duration(n) * time.Second) // sleep: the document's own wait, on the real server's clock
		return "", true
	}
	if m := assign.FindStringSubmatch(line); m != nil {
		if strings.HasPrefix(m[2], "$(") {
			p.vars[m[1]] = p.expand(t, m[2])
		} else {
			p.vars[m[1]] = strings.Join(p.words(t, m[2]), " ")
		}
		return "", true
	}
	m := forLoop.FindStringSubmatch(line)
	if m == nil || !strings.HasPrefix(m[2], "curl ") {
		t.Fatalf("a documented command this test cannot run: %q", line)
	}
	n := len(strings.Fields(m[1]))
	if s, ok := strings.CutPrefix(m[1], "$(seq "); ok {
		var err error
		if n, err = strconv.Atoi(strings.TrimSuffix(s, ")")); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	var b strings.Builder
	for range n {
		b.WriteString(p.curl(t, p.words(t, m[2])[1:]))
	}
	if m[3] != "" {
		b.WriteString("\n")
	}
	return b.String(), true
}

// words splits a shell line into words: single and double quotes,
// $SLUICE_ADMIN_TOKEN, and $(sluice …) run against p.
func (p *shell) words(t *testing.T, line string) []string {
	t.Helper()
	var (
		out []string
		w   strings.Builder
		in  bool // a word has started
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' && in:
			out, in = append(out, w.String()), false
			w.Reset()
		case c == ' ':
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			w.WriteString(line[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			w.WriteString(p.expand(t, line[i+1:i+1+j]))
			i, in = i+1+j, true
		default:
			j := strings.IndexAny(line[i:], ` '"`)
			if j < 0 {
				j = len(line) - i
			}
			w.WriteString(p.expand(t, line[i:i+j]))
			i, in = i+j-1, true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

var subst = regexp.MustCompile(`\$\((sluice [^)]*)\)`)

// expand replaces $SLUICE_ADMIN_TOKEN, the variables set and $(sluice …)
// in s, and the documents' address by p's.
func (p *shell) expand(t *testing.T, s string) string {
	t.Helper()
	s = strings.ReplaceAll(s, "$SLUICE_ADMIN_TOKEN", p.token)
	for k, v := range p.vars {
		s = strings.ReplaceAll(s, "$"+k, v)
	}
	s = subst.ReplaceAllStringFunc(s, func(m string) string {
		args := strings.Fields(m[2 : len(m)-1])
		out, errOut, code := p.cli(t, args[1:]...)
		if code != 0 {
			t.Fatalf("%s = exit %d: %s", m, code, errOut)
		}
		return strings.TrimSpace(out)
	})
	return strings.ReplaceAll(s, docBase, p.base)
}

// curl does what curl does with the flags the documents use.
func (p *shell) curl(t *testing.T, args []string) string {
	t.Helper()
	var (
		include, discard bool
		format, body     string
		method           string
		url              string
		header           = http.Header{}
	)
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-s":
		case "-i":
			include = true
		case "-o":
			i++
			discard = args[i] == "/dev/null"
		case "-w":
			i++
			format = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ":")
			header.Add(k, strings.TrimSpace(v))
		case "-d":
			i++
			body = args[i]
		case "-X":
			i++
			method = args[i]
		default:
			if strings.HasPrefix(args[i], "-") || url != "" {
				t.Fatalf("curl %q: this test does not know %q", args, args[i])
			}
			url = args[i]
		}
	}
	rd := io.Reader(nil)
	if body != "" {
		rd = strings.NewReader(body)
		if method == "" {
			method = http.MethodPost
		}
	}
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, b := do(t, req)
	var out strings.Builder
	if include {
		out.WriteString(strings.Join(responseLines(resp), "\n") + "\n\n")
	}
	if !discard {
		out.Write(b)
	}
	out.WriteString(strings.NewReplacer(`%{http_code}`, strconv.Itoa(resp.StatusCode), `\n`, "\n").Replace(format))
	return strings.ReplaceAll(out.String(), p.base, docBase)
}

// checkDocLines is checkLines for a pasted block: an empty line shown is
// not looked for, and runs of spaces compare as one (a table's columns
// are as wide as this run's ids).
func checkDocLines(t *testing.T, what string, want, got []string) {
	t.Helper()
	var w, g []string
	for _, l := range want {
		if strings.TrimSpace(l) != "" {
			w = append(w, strings.Join(strings.Fields(l), " "))
		}
	}
	for _, l := range got {
		g = append(g, strings.Join(strings.Fields(l), " "))
	}
	checkLines(t, what, w, g)
}
