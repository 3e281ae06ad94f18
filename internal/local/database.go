package local

import "github.com/sluicehq/sluice/internal/config"

// withLocalSSLMode returns dsn, a DATABASE_URL, with sslmode=disable when
// it names no sslmode and every host it names is this machine
// (config.OnThisMachine): the developer's own PostgreSQL, which serves no
// TLS, where the functions' default (verify-full, which config.Postgres
// adds) would refuse to connect. Any other dsn is returned as is, so a
// remote database is verified here as it is deployed.
func withLocalSSLMode(dsn string) string {
	if dsn == "" || config.HasSSLMode(dsn) || !config.OnThisMachine(dsn) {
		return dsn
	}
	return config.WithSSLMode(dsn, "disable")
}
