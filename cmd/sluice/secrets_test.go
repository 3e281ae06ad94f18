package main

import (
	"bufio"
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
	"github.com/sluicehq/sluice/internal/subjectkey"
	"github.com/sluicehq/sluice/internal/testenv"
)

// runBinaryLocal runs the built `sluice local` with env over the
// environment until its banner is printed (or it exits), stops it with
// SIGINT, and returns what it wrote to stdout and stderr and whether the
// banner came.
func runBinaryLocal(t *testing.T, env ...string) (stdout, stderr string, banner bool) {
	t.Helper()
	cmd := exec.Command(sluiceBin, "local", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), append([]string{"SLUICE_ADMIN_TOKEN=secrets-test", "REDIS_URL=", "LOG_LEVEL=info"}, env...)...)
	var errBuf testenv.Buffer
	cmd.Stderr = &errBuf
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sluice local: %v", err)
	}
	var out bytes.Buffer
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Ctrl-C stops") {
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
		banner = true
		_ = cmd.Process.Signal(syscall.SIGINT)
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("sluice local printed no banner within 60s")
	}
	<-done
	_ = cmd.Wait()
	return out.String(), errBuf.String(), banner
}

// TestBinaryRedactsDatabaseURL runs the built `sluice local` with a
// password in DATABASE_URL's query and in its user info (issue 44: the
// banner and the error line printed the query's): on a database that
// answers, one that does not, and a URL that does not parse. Neither the
// banner nor any log or error line holds the password; the banner shows
// where the password was. On the loopback database without an sslmode,
// sluice local says sslmode=disable itself (the functions' default,
// verify-full, would refuse a server without TLS).
func TestBinaryRedactsDatabaseURL(t *testing.T) {
	t.Parallel()
	secret := "pw-" + testenv.Random(t)
	db, err := url.Parse(pgtest.NewEmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	db.RawQuery = "password=" + secret // the test server trusts every login
	tests := []struct {
		name, dsn  string
		banner     bool
		wantOut    string // in stdout
		wantErrOut string // in stderr
	}{
		{"answers", db.String(), true,
			"PostgreSQL " + strings.Replace(db.String(), secret, "xxxxx", 1) + "&sslmode=disable\n", ""},
		{"unreachable", "postgres://postgres:" + secret + "@127.0.0.1:1/x?password=" + secret, true,
			"PostgreSQL postgres://postgres:xxxxx@127.0.0.1:1/x?password=xxxxx&sslmode=disable (unreachable",
			`"store":"PostgreSQL postgres://postgres:xxxxx@127.0.0.1:1/x?password=xxxxx&sslmode=disable"`},
		{"unparsable", "postgres://u:" + secret + "@db:notaport/x?password=" + secret, false,
			"", "DATABASE_URL: not a PostgreSQL connection string (invalid port)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, banner := runBinaryLocal(t, "DATABASE_URL="+tc.dsn)
			if banner != tc.banner {
				t.Errorf("banner printed: %v, want %v\nstdout:\n%s\nstderr:\n%s", banner, tc.banner, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("the password is printed:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			if !strings.Contains(stdout, tc.wantOut) || !strings.Contains(stderr, tc.wantErrOut) {
				t.Errorf("stdout wants %q, stderr %q:\nstdout:\n%s\nstderr:\n%s", tc.wantOut, tc.wantErrOut, stdout, stderr)
			}
		})
	}
}

// TestLocalSubjectKeyRecord: sluice local on a Redis whose subject-key
// record names another key does not start (its admin API would refuse
// every reset and refund), and says the two ways out: the key that wrote
// it, or --subject-key-from <id>, which records its own key in a
// compare-and-set.
func TestLocalSubjectKeyRecord(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "localkey")
	testenv.DeleteKeys(t, rdb, prefix)
	const key = "local-subject-key-0123456789"
	other := subjectkey.ID([]byte("another-deployments-key-0123456789"))
	if err := rdb.Set(context.Background(), subjectkey.Key(prefix), other, 0).Err(); err != nil {
		t.Fatal(err)
	}
	env := []string{"SLUICE_ADMIN_TOKEN=t", "REDIS_URL=" + testenv.RedisURL(t), "DATABASE_URL=", "LOG_LEVEL=warn", "SUBJECT_HMAC_KEY=" + key}
	var out, errOut bytes.Buffer
	code := runLocal(context.Background(), &out, &errOut, env, "--addr", "127.0.0.1:0", "--redis-prefix", prefix)
	for _, w := range []string{"records subject hash key id " + other, "set SUBJECT_HMAC_KEY to the key that wrote it", "sluice local --subject-key-from " + other, subjectkey.Recovery} {
		if code == 0 || !strings.Contains(errOut.String(), w) {
			t.Errorf("sluice local next to another key's record: exit %d, want it refused saying %q:\n%s%s", code, w, out.String(), errOut.String())
		}
	}
	startLocal(t, env[1:], "--redis-prefix", prefix, "--subject-key-from", other)
	if got := rdb.Get(context.Background(), subjectkey.Key(prefix)).Val(); got != subjectkey.ID([]byte(key)) {
		t.Errorf("record after --subject-key-from = %q, want this key's id %s", got, subjectkey.ID([]byte(key)))
	}
}
