package config

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/internal/testenv"
)

// rdsBehind returns a Config whose DB_SECRET_ARN names the test database
// as reached through addr (a testenv.Proxy), as the stack's functions
// reach Aurora or its RDS Proxy, and the secrets that serve it.
func rdsBehind(t *testing.T, addr string) (Config, fakeSecrets) {
	t.Helper()
	u, err := url.Parse(testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	pw, _ := u.User.Password()
	sec, _ := json.Marshal(map[string]string{
		"username": u.User.Username(), "password": pw + "x", // trust auth: any password
		"host": host, "port": port, "dbname": u.Path[1:],
	})
	return Config{DBSecretARN: dbARN, DBSSLMode: "disable"}, fakeSecrets{dbARN: string(sec)}
}

// openPool opens a pool for cfg as Postgres does, with secrets from sm,
// closed when the test ends.
func openPool(t *testing.T, ctx context.Context, cfg Config, sm secretGetter) *pgxpool.Pool {
	t.Helper()
	pc, err := postgresConfig(ctx, cfg, sm)
	if err != nil {
		t.Fatalf("postgresConfig: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// checkTLS connects to cfg's database and fails the test unless the
// connection is over TLS (wantErr "") or fails with an error containing
// wantErr.
func checkTLS(t *testing.T, cfg Config, sm secretGetter, wantErr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var ssl bool
	err := openPool(t, ctx, cfg, sm).QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl)
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("connect: %v, want a connection", err)
	case wantErr == "" && !ssl:
		t.Fatal("connected without TLS")
	case wantErr != "" && err == nil:
		t.Fatalf("connected (TLS %v), want an error containing %q", ssl, wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("connect: %v, want an error containing %q", err, wantErr)
	}
}

// ping opens a pool as the functions do and times its first query.
func ping(t *testing.T, cfg Config, sm fakeSecrets, budget time.Duration) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	pool := openPool(t, ctx, cfg, sm)
	start := time.Now()
	err := pool.Ping(ctx)
	return time.Since(start), err
}

// TestPostgresResume: a database that refuses connections for 20 s, then
// accepts, is reached by the first query, with no retry by the caller. An
// Aurora Serverless v2 instance paused at 0 ACU resumes on the first
// connection attempt, in about 15 s, and "the connection attempt might
// time out" meanwhile: clients are to retry (Amazon Aurora User Guide,
// "Scaling to Zero ACUs with automatic pause and resume for Aurora
// Serverless v2"). Here the refusal stands for any failed dial: the retry
// treats them all alike.
func TestPostgresResume(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 20 s")
	}
	p := testenv.NewProxy(t, hostPort(t))
	cfg, sm := rdsBehind(t, p.Addr())
	const refused = 20 * time.Second
	up := time.AfterFunc(refused, func() { p.Up(t) })
	defer up.Stop()
	took, err := ping(t, cfg, sm, 40*time.Second)
	if err != nil {
		t.Fatalf("Ping through a database refusing for %v = %v after %v, want nil", refused, err, took)
	}
	if took < refused {
		t.Errorf("Ping took %v, want at least the %v refused", took, refused)
	}
	// Within one backoff step of the moment it accepts.
	if took > refused+pgDialBackoffMax+time.Second {
		t.Errorf("Ping took %v, want at most %v", took, refused+pgDialBackoffMax+time.Second)
	}
}

// TestPostgresSlowProxy: a proxy that accepts the connection at once but
// answers the startup only after 6 s, past the 5 s that bounded a
// connection before, is waited for. RDS Proxy holds a new client until it
// has a connection to its target, up to ConnectionBorrowTimeout (120 s by
// default), and right after the proxy's creation its targets are still
// registering (Amazon RDS User Guide, "Creating a proxy" and
// "Troubleshooting for RDS Proxy": target state REGISTERING).
func TestPostgresSlowProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 12 s")
	}
	p := testenv.NewProxy(t, hostPort(t))
	p.Up(t)
	const delay = 6 * time.Second
	p.SetDelay(delay)
	cfg, sm := rdsBehind(t, p.Addr())
	took, err := ping(t, cfg, sm, 25*time.Second)
	if err != nil {
		t.Fatalf("Ping through a proxy answering after %v = %v after %v, want nil", delay, err, took)
	}
	if took < delay {
		t.Errorf("Ping took %v, want at least the proxy's %v", took, delay)
	}
}

// hostPort is the test database's host:port.
func hostPort(t *testing.T) string {
	u, err := url.Parse(testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// TestPostgresReleases: with DB_SECRET_ARN (a deployment on AWS) a pool
// holds no connection once a query is done, so a frozen Lambda keeps no
// Aurora connection open (which would keep the cluster from pausing);
// with DATABASE_URL it keeps one idle, as a long-running process wants.
func TestPostgresReleases(t *testing.T) {
	p := testenv.NewProxy(t, hostPort(t))
	p.Up(t)
	rds, sm := rdsBehind(t, p.Addr())
	u, err := url.Parse(testenv.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		idle int32
	}{{"DB_SECRET_ARN", rds, 0}, {"DATABASE_URL", Config{DatabaseURL: Secret(u.String())}, 1}} {
		pool := openPool(t, t.Context(), tc.cfg, sm)
		var one int
		if err := pool.QueryRow(t.Context(), "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("%s: SELECT 1: %v", tc.name, err)
		}
		// pgxpool runs AfterRelease and destroys the connection on a
		// goroutine of its own: wait for it, a second at most.
		testenv.Await(t, time.Second, 5*time.Millisecond, fmt.Sprintf("%s: the pool down to %d connection(s) after the query", tc.name, tc.idle),
			func() bool { return pool.Stat().TotalConns() == tc.idle })
		pool.Close()
	}
}
