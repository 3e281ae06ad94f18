package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/store/postgres/pgtest"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"postgres://u:sekrit@db:5432/x?sslmode=disable", "postgres://u:xxxxx@db:5432/x?sslmode=disable"},
		{"postgres://u:p@ss:w@rd@db/x", "postgres://u:xxxxx@db/x"},
		{"postgres://u@db/x", "postgres://u@db/x"},
		{"redis://:sekrit@cache:6379/0", "redis://:xxxxx@cache:6379/0"},
		{"postgres://u:sekrit@[::1", "postgres://u:xxxxx@[::1"},
		// The query's passwords (issue 44): libpq reads ?password= and
		// ?sslpassword=, go-redis ?sentinel_password=, any case, escaped.
		{"postgres://u@db/x?sslmode=disable&password=sekrit", "postgres://u@db/x?sslmode=disable&password=xxxxx"},
		{"postgres://db/x?PassWord=se%26krit&sslpassword=k3y", "postgres://db/x?PassWord=xxxxx&sslpassword=xxxxx"},
		{"postgres://db/x?pass%77ord=sekrit", "postgres://db/x?pass%77ord=xxxxx"},
		{"postgres://u:a@db/x?password=b@c", "postgres://u:xxxxx@db/x?password=xxxxx"},
		{"redis://cache:26379/0?master_name=m&sentinel_password=sekrit", "redis://cache:26379/0?master_name=m&sentinel_password=xxxxx"},
		{"postgres://u:sekrit@h1:5432,h2:5433/x?password=p", "postgres://u:xxxxx@h1:5432,h2:5433/x?password=xxxxx"},
		// What net/url rejects: masked from the user's colon to the last
		// @, and whole when that stretch may be a query's.
		{"postgres://u@db:bad/x?password=sekrit", "postgres://u@db:bad/x?password=xxxxx"},
		{"postgres://u:pa/ss?x@db/x", "postgres://[redacted]"},
		{"postgres://u@db:bad/x?password=a@b", "postgres://[redacted]"},
		{"host=db user=u password=sekrit dbname=x", "host=db user=u password=xxxxx dbname=x"},
		{"host=db password = sekrit port=5432", "host=db password = xxxxx port=5432"},
		{`host=db password='se cr\'et' port=5432`, "host=db password=xxxxx port=5432"},
		{"host=db sslpassword=sekrit", "host=db sslpassword=xxxxx"},
		{"password=sekrit", "password=xxxxx"},
		{"host=:// password=sekrit", "host=:// password=xxxxx"},
		{"host=db passfile=/x user=u", "host=db passfile=/x user=u"},
		{"postgres://db/x??password=sekrit", "postgres://db/x??password=xxxxx"},
		{"host=db password='unterminated", "[redacted]"},
		{"host=db stray password=sekrit", "[redacted]"},
		{"host=  password=sekrit", "[redacted]"},
		{"just-a-secret", "[redacted]"},
	}
	for _, tc := range tests {
		if got := Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRedactIn: an error quoting a connection string, whole (net/url's) or
// in pieces, says nothing of its password once through redactIn and
// parseError, which FromEnv and the Redis client use.
func TestRedactIn(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://u@db:notaport/x?password=hunter4",
		"postgres://u:hunter4@db:notaport/x",
		"postgres://u:hun@ter4@db:notaport/x",
		"postgres://u:hun:ter4@db:notaport/x?sslpassword=hunter4",
		"postgres://u:hunter4@[::1/x",
		"redis://u:hunter4@cache:notaport",
		"redis://cache:notaport?password=hunter4",
	} {
		pg := strings.Replace(dsn, "redis://", "postgres://", 1)
		_, err := FromEnv(env(map[string]string{"DATABASE_URL": pg, "REDIS_URL": strings.Replace(pg, "postgres://", "redis://", 1)}))
		if err == nil {
			t.Errorf("FromEnv(%q) = nil error, want it refused", dsn)
			continue
		}
		for _, piece := range []string{"hunter4", "hun", "ter4"} {
			if strings.Contains(err.Error(), piece) {
				t.Errorf("FromEnv(%q) error says %q:\n%v", dsn, piece, err)
			}
		}
		if !strings.Contains(err.Error(), "DATABASE_URL: not a PostgreSQL connection string (") || !strings.Contains(err.Error(), "REDIS_URL: not a redis") {
			t.Errorf("FromEnv(%q) error does not say why:\n%v", dsn, err)
		}
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h/x", "host=h password=pw", "password='a\\'b'", "x", "db/x?sslmode=disable"} {
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, dsn, password string) {
		// A password of hex digits alone can come out of the escaping of
		// other bytes (%D0): not a leak.
		if len(password) < 4 || strings.ContainsAny(password, " \t\n\r'\\@:/=?#&%") || strings.Contains("xxxxx[redacted]", password) ||
			strings.Trim(password, "0123456789abcdefABCDEF") == "" {
			return
		}
		for _, s := range []string{
			"postgres://user:" + password + "@" + dsn,
			"postgres://" + dsn + "?password=" + password,
			"postgres://h/x?a=" + dsn + "&sslpassword=" + password,
			"host=" + dsn + " password=" + password,
			"password=" + password + " " + dsn,
		} {
			if strings.Contains(s[:strings.Index(s, password)], password) {
				continue
			}
			got := Redact(s)
			if strings.Count(got, password) > strings.Count(strings.Replace(s, password, "", 1), password) {
				t.Fatalf("Redact(%q) = %q: the password is still there", s, got)
			}
		}
	})
}

func TestWithSSLMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@db/x", "postgres://u@db/x?sslmode=verify-full"},
		{"postgres://u@db/x?connect_timeout=2", "postgres://u@db/x?connect_timeout=2&sslmode=verify-full"},
		{"postgres://u@db/x?", "postgres://u@db/x?sslmode=verify-full"},
		{"postgres://u@db/x?sslmode=disable", "postgres://u@db/x?sslmode=disable"},
		{"postgres://u@db/x?SSLMode=require", "postgres://u@db/x?SSLMode=require"},
		{"postgres://u@db/x?ssl%6Dode=require", "postgres://u@db/x?ssl%6Dode=require"},
		{"host=db user=u", "host=db user=u sslmode=verify-full"},
		{"host=db sslmode = allow", "host=db sslmode = allow"},
		{"host=db application_name='sslmode=disable'", "host=db application_name='sslmode=disable' sslmode=verify-full"},
	} {
		if got := WithSSLMode(tc.in, "verify-full"); got != tc.want {
			t.Errorf("WithSSLMode(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOnThisMachine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn  string
		want bool
	}{
		{"postgres://u@localhost/x", true},
		{"postgres://u@127.0.0.2:5432/x", true},
		{"postgres://u@[::1]:5432/x", true},
		{"host=/var/run/postgresql user=u", true},
		{"postgres://u@localhost,127.0.0.1/x", true},
		{"postgres://u@localhost,db.example/x", false},
		{"postgres://u@db.example/x", false},
		{"postgres://u@10.0.0.1/x", false},
		{"postgres://u@db:notaport/x", false},
	} {
		if got := OnThisMachine(tc.dsn); got != tc.want {
			t.Errorf("OnThisMachine(%q) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
}

// TestDatabaseURLVerifies connects, as every function and sluice local
// does (postgresConfig), to real PostgreSQL servers with a DATABASE_URL
// that names no sslmode. It verifies the server as DB_SECRET_ARN's
// default does: a certificate from a CA outside the system roots and the
// RDS bundle is refused, one from the CA sslrootcert names is taken, and
// a server without TLS is refused. Before, pgx's default (prefer) took
// any certificate, and fell back to no TLS at all.
func TestDatabaseURLVerifies(t *testing.T) {
	pki := newTestPKI(t)
	tlsSrv := pgtest.StartServer(t, pgtest.WithTLS(pki.certPEM, pki.keyPEM))
	plain := pgtest.StartServer(t)
	caFile := filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(caFile, pki.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	at := func(s *pgtest.Server, host, query string) string {
		return fmt.Sprintf("postgres://postgres@%s:%d/postgres%s", host, s.Port(), query)
	}
	tests := []struct {
		name, url string
		wantErr   string // "" connects, over TLS
	}{
		{"no sslmode refuses a CA outside the bundle", at(tlsSrv, "localhost", ""), "certificate signed by unknown authority"},
		{"no sslmode checks the host name", at(tlsSrv, "127.0.0.1", "?sslrootcert="+caFile), "127.0.0.1"},
		{"no sslmode trusts sslrootcert", at(tlsSrv, "localhost", "?sslrootcert="+caFile), ""},
		{"keyword/value too", fmt.Sprintf("host=localhost port=%d user=postgres dbname=postgres sslrootcert=%s", tlsSrv.Port(), caFile), ""},
		{"no sslmode refuses a server without TLS", at(plain, "localhost", ""), "server refused TLS connection"},
		{"require opts out of verification", at(tlsSrv, "localhost", "?sslmode=require"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkTLS(t, Config{DatabaseURL: Secret(tc.url)}, nil, tc.wantErr) })
	}
}
