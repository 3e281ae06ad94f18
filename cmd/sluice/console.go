package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/console"
	"github.com/sluicehq/sluice/internal/httpapi"
)

// runConsole serves the web console on loopback and proxies its admin API
// calls to --endpoint, signed as every CLI call is (SigV4 with the
// operator's credentials for an execute-api endpoint, so the audit log
// records their IAM identity; the bearer token for sluice local).
func runConsole(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "console", "", `Serve the web console on 127.0.0.1 for an admin API: a deployed stack's
(--endpoint https://<id>.execute-api.<region>.amazonaws.com/prod, each
call signed with your AWS credentials) or sluice local's. It prints a URL
holding a random token made for this run: only a browser given that URL
can use the console's API, not other users of this machine. Ctrl-C stops.`)
	a := addAdminFlags(fs)
	addr := fs.String("addr", "127.0.0.1:0", "listen address, on loopback (port 0 picks a free one)")
	_, c, err := a.connect(ctx, fs, args, 0)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageErrorf("--addr %q: want a loopback address such as 127.0.0.1:0; the console acts with your credentials", *addr)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("generate console token: %w", err)
	}
	token := "sc_" + hex.EncodeToString(b[:])

	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console", console.Handler()))
	mux.Handle("/", http.RedirectHandler("/console/", http.StatusFound))
	mux.Handle("/admin/", requireToken(token, http.StripPrefix("/admin", proxyAdmin(c))))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.NewJSONHandler(e.stderr, nil), slog.LevelWarn),
	}
	signing := "bearer token"
	if c.signer != nil {
		signing = "SigV4, your AWS credentials (" + c.region + ")"
	}
	fmt.Fprintf(e.stdout, `Sluice console
  open       http://%s/console/#token=%s
  admin API  %s  (%s)

Ctrl-C stops.
`, ln.Addr(), token, c.endpoint.Redacted(), signing)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-served
	return nil
}

// proxiedHeaders are the request and response headers the admin API uses;
// nothing else crosses the proxy (no cookies, no browser Authorization).
var (
	proxiedRequest  = []string{"Accept", "Content-Type", "If-Match"}
	proxiedResponse = []string{"Content-Type", "Etag", "Location", "Allow", "Retry-After", "Cache-Control", "Accept-Post"}
)

// proxyAdmin forwards each request, path and query as they are, to the
// admin API through c, which signs it. The answer, error statuses and
// problem documents included, goes back unchanged.
func proxyAdmin(c *adminClient) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read request body", http.StatusBadRequest)
			return
		}
		target := c.endpoint.String() + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target, bytes.NewReader(body))
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		for _, k := range proxiedRequest {
			if v := r.Header.Get(k); v != "" {
				req.Header.Set(k, v)
			}
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.signer != nil {
			if err := c.sign(r.Context(), req, body); err != nil {
				writeProxyError(w, err)
				return
			}
		}
		resp, err := c.http.Do(req)
		if err != nil {
			writeProxyError(w, err)
			return
		}
		defer resp.Body.Close()
		for _, k := range proxiedResponse {
			if v := resp.Header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, io.LimitReader(resp.Body, maxResponse)) //nolint:errcheck // the browser has gone
	})
}

// writeProxyError answers a failure to reach or sign for the admin API as
// a problem document the console shows like any other.
func writeProxyError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusBadGateway)
	b, _ := json.Marshal(httpapi.Problem{Type: "about:blank", Title: "Bad Gateway", Status: http.StatusBadGateway,
		Detail: "sluice console could not reach the admin API: " + err.Error()})
	w.Write(b) //nolint:errcheck // the browser has gone
}
