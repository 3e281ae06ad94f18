package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/internal/local"
)

type consoleCmd struct {
	adminFlags `embed:""`

	Addr string `default:"127.0.0.1:0" help:"Listen address, on loopback (port 0: any)."`
}

func (cmd *consoleCmd) Help() string {
	return `Serves the web console on 127.0.0.1 for an admin API: a deployed stack's
(--endpoint https://<id>.execute-api.<region>.amazonaws.com/prod, each call
signed with your AWS credentials) or sluice local's. It prints a URL holding a
random token made for this run: only a browser given that URL can use the
console's API, not other users of this machine. Ctrl-C stops.`
}

// Run serves the console on loopback and proxies its admin API calls to
// --endpoint, signed as every CLI call is (SigV4 with the operator's
// credentials for an execute-api endpoint, so the audit log records their
// IAM identity; the bearer token for sluice local).
func (cmd *consoleCmd) Run(e *env, c *adminclient.Client) error {
	host, _, err := net.SplitHostPort(cmd.Addr)
	if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErrorf("--addr %q: want a loopback address such as 127.0.0.1:0; the console acts with your credentials", cmd.Addr)
	}
	var b [24]byte
	_, _ = rand.Read(b[:]) // fills b or crashes the program: no error (Go 1.24)
	token := "sc_" + hex.EncodeToString(b[:])

	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", console.Handler()))
	mux.Handle("/", http.RedirectHandler("/console/", http.StatusFound))
	mux.Handle("/admin/", local.RequireToken(token, "the token in the URL `sluice console` printed", http.StripPrefix("/admin", c.Proxy())))
	ln, err := net.Listen("tcp", cmd.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cmd.Addr, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.NewJSONHandler(e.stderr, nil), slog.LevelWarn),
	}
	fmt.Fprintf(e.stdout, `Sluice console
  open       http://%s/console/#token=%s
  admin API  %s  (%s)

Ctrl-C stops.
`, ln.Addr(), token, c.Endpoint(), c.Auth())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-e.ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-served
	return nil
}
