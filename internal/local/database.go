package local

import (
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sluicehq/sluice/internal/config"
)

// withLocalSSLMode returns dsn, a DATABASE_URL, with sslmode=disable when
// it names no sslmode and every host it names is this machine (localhost,
// a loopback address or a Unix socket): the developer's own PostgreSQL,
// which serves no TLS, where the functions' default (verify-full, which
// config.Postgres adds) would refuse to connect. Any other dsn is
// returned as is, so a remote database is verified here as it is
// deployed.
func withLocalSSLMode(dsn string) string {
	if dsn == "" || config.HasSSLMode(dsn) {
		return dsn
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return dsn // config.FromEnv said why
	}
	hosts := []string{pc.Host}
	for _, fb := range pc.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	for _, h := range hosts {
		ip := net.ParseIP(h)
		if !(h == "localhost" || strings.HasPrefix(h, "/") || ip != nil && ip.IsLoopback()) {
			return dsn
		}
	}
	return config.WithSSLMode(dsn, "disable")
}
