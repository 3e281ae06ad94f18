package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Server is a private PostgreSQL server a test started on a free loopback
// port, for the tests that stop and restart the database: they never touch
// the shared one. Its "postgres" database is migrated.
type Server struct {
	// URL is the migrated "postgres" database on the server; it stays the
	// same across Stop and Start.
	URL string

	bin, dir string
	port     int
	settings []string        // extra -c settings of postgres
	proc     testenv.Process // runuser or postgres
}

// StartServer initialises a cluster in a fresh directory (initdb, no
// fsync), starts it, applies every migration to its "postgres" database and
// returns once it answers. initdb refuses to run as root: as root the
// cluster belongs to the postgres user and its programs run through
// runuser. The server is stopped (by its postmaster's pid) and its
// directory removed when the test ends.
//
// It finds the programs in PG_BIN, else the newest /usr/lib/postgresql/*/bin.
// Like every integration test it needs SLUICE_TEST_DATABASE_URL (see
// testenv.Lookup); without the programs the test skips, or fails under
// SLUICE_REQUIRE_INTEGRATION=1.
//
// Options add to it: WithTLS.
func StartServer(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	testenv.DatabaseURL(tb)
	bin := pgBin(tb)
	dir, err := os.MkdirTemp("", "sluice-pgtest-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	// The postgres user must reach the directory (MkdirTemp makes it 0700).
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	s := &Server{bin: bin, dir: dir, port: testenv.FreePorts(tb, 1, 0)[0]}
	s.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	s.chown(tb)
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "-N")
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	for _, o := range opts {
		o(tb, s)
	}
	s.chown(tb)
	tb.Cleanup(s.Stop)
	s.Start(tb)
	migrate(tb, s.URL)
	return s
}

// Option configures a Server before it starts.
type Option func(tb testing.TB, s *Server)

// WithTLS makes the server accept TLS connections with the certificate
// chain and key given (PEM), beside plain ones (URL stays sslmode=disable).
func WithTLS(certPEM, keyPEM []byte) Option {
	return func(tb testing.TB, s *Server) {
		tb.Helper()
		cert, key := filepath.Join(s.dir, "server.crt"), filepath.Join(s.dir, "server.key")
		if err := os.WriteFile(cert, certPEM, 0o644); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		// postgres refuses a key others can read.
		if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		s.settings = append(s.settings, "-c", "ssl=on", "-c", "ssl_cert_file="+cert, "-c", "ssl_key_file="+key)
	}
}

// Port returns the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// chown gives the directory to the postgres user when running as root.
func (s *Server) chown(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if out, err := exec.Command("chown", "-R", "postgres:", s.dir).CombinedOutput(); err != nil {
		tb.Fatalf("pgtest: chown %s: %v\n%s", s.dir, err, out)
	}
}

// command runs a PostgreSQL program, as the postgres user when root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return exec.Command(name, args...)
}

// Start starts the server (again) on the same port and data directory and
// returns once it accepts connections.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	args := append([]string{"-D", s.data(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=50"}, s.settings...)
	s.proc.Start(tb, s.command(filepath.Join(s.bin, "postgres"), args...), filepath.Join(s.dir, "postgres.log"))
	var last error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.URL)
		if err == nil {
			_ = conn.Close(ctx)
			cancel()
			return
		}
		cancel()
		last = err
	}
	tb.Fatalf("pgtest: postgres on port %d did not start: %v\n%s", s.port, last, s.Log())
}

// Stop shuts the server down the way an operator or a failover does (the
// postmaster's "fast" shutdown, SIGINT: open sessions are terminated) and
// waits for it to exit. It is a no-op when the server is stopped.
func (s *Server) Stop() {
	// As root the process is runuser: signal the postmaster itself, by the
	// pid in its pid file.
	pid := 0
	if b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid")); err == nil {
		pid, _ = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	}
	s.proc.Stop(syscall.SIGINT, pid, 30*time.Second)
}

// Log returns the server's log so far, for failure messages.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return string(b)
}

// pgBin finds the directory of initdb and postgres.
func pgBin(tb testing.TB) string {
	tb.Helper()
	dirs := []string{os.Getenv("PG_BIN")}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	dirs = append(dirs, found...)
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	err := errors.New("no initdb and postgres in PG_BIN or /usr/lib/postgresql/*/bin")
	if os.Getenv(testenv.RequireVar) == "1" {
		tb.Fatalf("pgtest: %v and %s=1", err, testenv.RequireVar)
	}
	tb.Skipf("pgtest: %v", err)
	return ""
}

// version is the major version in /usr/lib/postgresql/<n>/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
