package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// TestBinary is the one test of the built binary, as a person runs it:
// `sluice local` starts and prints its banner, the CLI reads its rules
// with the token from the environment, `sluice load --strict` passes, and
// Ctrl-C (SIGINT) stops it cleanly. Everything else runs in process.
func TestBinary(t *testing.T) {
	t.Parallel()
	token := "smoke-token"
	cmd := exec.Command(sluiceBin, "local", "--addr", "127.0.0.1:0", "--seed", "../../examples/rules.json")
	cmd.Env = append(os.Environ(), "SLUICE_ADMIN_TOKEN="+token, "REDIS_URL=", "DATABASE_URL=", "LOG_LEVEL=warn")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sluice local: %v", err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // already gone when the test passes
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		base := ""
		for sc.Scan() {
			if m := demoLine.FindStringSubmatch(sc.Text() + " "); m != nil && base == "" {
				base = m[1]
			}
			if base != "" && strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				ready <- base
			}
		}
	}()
	var base string
	select {
	case base = <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("sluice local printed no banner within 60s")
	}

	cli := exec.Command(sluiceBin, "-o", "json", "rules", "ls")
	cli.Env = append(os.Environ(), "SLUICE_ENDPOINT="+base+"/admin", "SLUICE_ADMIN_TOKEN="+token)
	out, err := cli.Output()
	var rs []rules.Rule
	if err != nil || json.Unmarshal(out, &rs) != nil || len(rs) != 7 {
		t.Errorf("sluice -o json rules ls = %v, %d rules:\n%s\nwant the 7 seeded rules", err, len(rs), out)
	}
	load := exec.Command(sluiceBin, "load", base+"/hello", "--strict", "--quiet", "--requests", "20", "--rate", "0", "--subjects", "2")
	if out, err := load.CombinedOutput(); err != nil {
		t.Errorf("sluice load --strict = %v:\n%s", err, out)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("sluice local after Ctrl-C: %v, want a clean exit", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("sluice local did not stop within 15s of Ctrl-C")
	}
}
