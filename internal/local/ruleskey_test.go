package local

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rulesync"
)

// TestLocalRulesKey: sluice local generates the rule writers' key once,
// keeps it in the state directory as it keeps the subject key, and prints
// its public half (RULES_PUBLIC_KEY) for limiters sharing its Redis; a
// second run with the same state prints the same key.
func TestLocalRulesKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func() string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r, w := io.Pipe()
		done := make(chan error, 1)
		env := map[string]string{"LOG_LEVEL": "warn", "REDIS_TIMEOUT": "1s"}
		go func() {
			done <- Run(ctx, Config{Addr: "127.0.0.1:0", API: "demo", Stage: "local", Seed: "../../examples/rules.json", SeedSet: true,
				Token: "tok", StateDir: dir, Getenv: func(k string) string { return env[k] }}, w, io.Discard)
			w.Close()
		}()
		var key string
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := regexp.MustCompile(`^  rules key  (\S+)  \(RULES_PUBLIC_KEY`).FindStringSubmatch(sc.Text()); m != nil {
				key = m[1]
			}
			if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				break
			}
		}
		go io.Copy(io.Discard, r) //nolint:errcheck // the rest
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("Run did not return within 15s of its context ending")
		}
		return key
	}
	first := run()
	secret, err := os.ReadFile(filepath.Join(dir, "rules-signing.key"))
	if err != nil {
		t.Fatalf("no rules-signing.key in the state directory: %v", err)
	}
	want := rulesync.FormatPublicKey(rulesync.NewSigningKey([]byte(strings.TrimSpace(string(secret)))).Public().(ed25519.PublicKey))
	if first != want {
		t.Errorf("banner rules key = %q, want the kept secret's public half %q", first, want)
	}
	if again := run(); again != first {
		t.Errorf("second run's rules key = %q, want the kept %q", again, first)
	}
}
