package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
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

// TestListensOnADDR runs the built program as a user does, beside a
// sluice local that holds :8080: it serves on ADDR, and its middleware
// limits (DEFAULT_LIMIT 1 a minute: the second request is a 429).
func TestListensOnADDR(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	bin := filepath.Join(t.TempDir(), "service")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "REDIS_URL="+redisURL, "REDIS_PREFIX="+testenv.Prefix(t, "svc"),
		"SUBJECT_HMAC_KEY=0123456789abcdef0123456789abcdef", "SUBJECT_SOURCES=header:x-api-key", "DEFAULT_LIMIT=1/1m")
	var logs testenv.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // killed
	get := func() int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/orders/7", nil)
		req.Header.Set("x-api-key", "addr-test")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var first int
	testenv.Await(t, 20*time.Second, 50*time.Millisecond, "the service listening on ADDR "+addr, func() bool {
		first = get()
		return first != 0
	})
	if second := get(); first != http.StatusOK || second != http.StatusTooManyRequests {
		t.Errorf("GET /orders/7 twice on ADDR = %d, %d, want 200, 429; logs:\n%s", first, second, &logs)
	}
}
