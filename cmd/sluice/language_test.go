package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLILanguage: errors name the flag, the file position and the fix.
func TestCLILanguage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\n  \"api\": nul\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rules", "ls", "--api"}, 2, "--api needs a value after it, such as --api STRING"},
		{[]string{"rules", "ls", "--api", "--route", "x"}, 2, "--api needs a value after it"},
		{[]string{"rules", "ls", "--api", "a", "--api", "b"}, 2, "--api is given more than once; it takes one value"},
		{[]string{"rules", "put", "-f", bad, "--endpoint", "http://127.0.0.1:1/admin"}, 1, bad + ":2:13: not valid JSON"},
	} {
		code, _, stderr := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("sluice %s = exit %d, %q; want exit %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.want)
		}
	}
	// A flag that takes a list may repeat.
	if code, _, stderr := runCLI(t, "", "lint", "-f", bad, "-f", bad); strings.Contains(stderr, "more than once") || code != 1 {
		t.Errorf("lint -f twice = exit %d, %q; want the files read", code, stderr)
	}
}
