package config

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite docs/config.md's environment table from config.Vars")

// TestVarsAreWhatFromEnvReads proves the table and the loader name the same
// variables: a row nothing reads, or a variable read without a row, fails.
func TestVarsAreWhatFromEnvReads(t *testing.T) {
	read := map[string]bool{}
	if _, err := FromEnv(func(k string) string { read[k] = true; return "" }); err != nil {
		t.Fatalf("FromEnv(empty) = %v", err)
	}
	seen := map[string]bool{}
	for _, v := range Vars {
		if seen[v.Name] {
			t.Errorf("Vars lists %s twice", v.Name)
		}
		seen[v.Name] = true
		if !read[v.Name] {
			t.Errorf("Vars lists %s, which FromEnv never reads", v.Name)
		}
		if strings.Contains(v.Doc+v.DefaultDoc+v.Default, "|") {
			t.Errorf("Vars row %s has a | in a cell, which splits the markdown table", v.Name)
		}
		if v.Doc == "" || len(v.Functions) == 0 || v.Default == "" && v.DefaultDoc == "" {
			t.Errorf("Vars row %s lacks a Doc, Functions, or a Default or DefaultDoc", v.Name)
		}
	}
	for name := range read {
		if !seen[name] {
			t.Errorf("FromEnv reads %s, which has no row in Vars", name)
		}
	}
}

// TestFromEnvRefusesUnlistedVar proves the loader itself reports a variable
// it reads that has no row: dropping a row makes FromEnv fail.
func TestFromEnvRefusesUnlistedVar(t *testing.T) {
	saved := Vars
	defer func() { Vars = saved }()
	i := slices.IndexFunc(Vars, func(v Var) bool { return v.Name == "LEASE_TTL" })
	Vars = slices.Delete(slices.Clone(Vars), i, i+1)
	_, err := FromEnv(env(nil))
	if err == nil || !strings.Contains(err.Error(), "LEASE_TTL: read by config.FromEnv but missing from config.Vars") {
		t.Errorf("FromEnv without LEASE_TTL's row = %v, want the missing row reported", err)
	}
}

// TestVarsDefaultsAreTheConstants keeps the exported Default* constants,
// which other packages use, and the table's defaults the same.
func TestVarsDefaultsAreTheConstants(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"REDIS_TIMEOUT", c.RedisTimeout, DefaultRedisTimeout},
		{"REDIS_POOL_SIZE", c.RedisPoolSize, DefaultRedisPoolSize},
		{"DB_SSLMODE", c.DBSSLMode, DefaultDBSSLMode},
	} {
		if tc.got != tc.want {
			t.Errorf("%s defaults to %v (Vars), want %v (the Default constant)", tc.name, tc.got, tc.want)
		}
	}
}

// envDocs are the files with rendered tables, relative to this package.
// The README links docs/config.md instead of repeating a table.
var envDocs = []string{"../../docs/config.md"}

const (
	envBegin = "<!-- env:begin "
	envEnd   = "<!-- env:end -->"
)

// renderEnvDocs returns doc with every block between "<!-- env:begin
// full -->" and "<!-- env:end -->" replaced by Markdown(), and how many
// blocks it found; "full" is the one table format.
func renderEnvDocs(doc string) (string, int, error) {
	var (
		b strings.Builder
		n int
	)
	for {
		i := strings.Index(doc, envBegin)
		if i < 0 {
			b.WriteString(doc)
			return b.String(), n, nil
		}
		format, _, ok := strings.Cut(doc[i+len(envBegin):], " -->")
		if !ok {
			return "", n, fmt.Errorf("unterminated %q", envBegin)
		}
		start := i + len(envBegin) + len(format) + len(" -->\n")
		j := strings.Index(doc[i:], envEnd)
		if j < 0 || i+j < start {
			return "", n, fmt.Errorf("%s%s --> without %s on a line of its own after it", envBegin, format, envEnd)
		}
		if format != "full" {
			return "", n, fmt.Errorf("unknown table format %q: want full", format)
		}
		b.WriteString(doc[:start])
		b.WriteString(Markdown())
		doc = doc[i+j:]
		n++
	}
}

// TestEnvDocs fails when a table of environment variables in the docs is
// not what config.Vars renders. Fix with
//
//	go test ./internal/config -run TestEnvDocs -update
func TestEnvDocs(t *testing.T) {
	for _, path := range envDocs {
		raw, err := os.ReadFile(filepath.FromSlash(path))
		if err != nil {
			t.Fatal(err)
		}
		want, n, err := renderEnvDocs(string(raw))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if n == 0 {
			t.Errorf("%s has no %sFORMAT --> … %s table", path, envBegin, envEnd)
			continue
		}
		if want == string(raw) {
			continue
		}
		if *update {
			if err := os.WriteFile(filepath.FromSlash(path), []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote %s", path)
			continue
		}
		t.Errorf("%s's environment table differs from config.Vars (-file +Vars):\n%s\nrun: go test ./internal/config -run TestEnvDocs -update",
			path, cmp.Diff(string(raw), want))
	}
}

func TestRenderEnvDocs(t *testing.T) {
	table := Markdown()
	for _, tc := range []struct {
		name, in, want string
		n              int
		bad            bool
	}{
		{"stale table replaced", "a\n<!-- env:begin full -->\n| old |\n<!-- env:end -->\nb\n",
			"a\n<!-- env:begin full -->\n" + table + "<!-- env:end -->\nb\n", 1, false},
		{"empty block filled", "<!-- env:begin full -->\n<!-- env:end -->\n",
			"<!-- env:begin full -->\n" + table + "<!-- env:end -->\n", 1, false},
		{"the README's old short table", "<!-- env:begin short -->\n<!-- env:end -->\n", "", 0, true},
		{"no block", "just text\n", "just text\n", 0, false},
		{"unknown format", "<!-- env:begin wide -->\n<!-- env:end -->\n", "", 0, true},
		{"no end", "<!-- env:begin full -->\n| x |\n", "", 0, true},
	} {
		got, n, err := renderEnvDocs(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("%s: renderEnvDocs error = %v, want error %v", tc.name, err, tc.bad)
			continue
		}
		if !tc.bad && (got != tc.want || n != tc.n) {
			t.Errorf("%s: renderEnvDocs = %d blocks, %q; want %d, %q", tc.name, n, got, tc.n, tc.want)
		}
	}
	for _, v := range Vars {
		if !strings.Contains(table, "| `"+v.Name+"` |") {
			t.Errorf("Markdown() lacks %s", v.Name)
		}
	}
	if rows := strings.Count(table, "\n| `"); rows != len(Vars) {
		t.Errorf("Markdown() has %d rows, want %d", rows, len(Vars))
	}
}
