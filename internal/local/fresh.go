package local

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rulesync"
)

// freshTimeout bounds the rules reload an admin write waits for.
const freshTimeout = 2 * time.Second

// sameProcess wraps the admin API (mounted without its /admin prefix) so
// that a write holds in this process before its answer leaves: after a
// rules or plans write succeeds, the authorizer's rules cache reads the
// version the write published; after a subject reset (DELETE
// /subjects/{subject}/buckets) or a refund (POST /usage with a negative
// cost), the authorizer's limiter drops its cached denials of the subject.
// A deployed authorizer has neither shortcut: it sees a write within
// RULES_VERSION_POLL (1s) and repeats a cached denial for at most its deny
// cache's age (1s).
func sameProcess(next http.Handler, cache *rulesync.Cache, lim *limiter.Limiter, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var before func(context.Context)
		p := r.URL.Path
		switch {
		case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions:
		case strings.HasPrefix(p, "/rules") || strings.HasPrefix(p, "/plans"):
			if cache != nil {
				before = func(ctx context.Context) {
					ctx, cancel := context.WithTimeout(ctx, freshTimeout)
					defer cancel()
					if err := cache.Refresh(ctx, false); err != nil {
						log.WarnContext(ctx, "reload the rules after an admin write", slog.Any("error", err))
					}
				}
			}
		case r.Method == http.MethodDelete && strings.HasPrefix(p, "/subjects/") && strings.HasSuffix(p, "/buckets"):
			subject := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(p, "/subjects/"), "/buckets"))
			before = func(context.Context) { lim.ForgetDenials(subject) }
		case r.Method == http.MethodPost && p == "/usage":
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			var in struct {
				Subject string `json:"subject"`
				Cost    int64  `json:"cost"`
			}
			if err == nil && json.Unmarshal(body, &in) == nil && in.Cost < 0 {
				subject := strings.TrimSpace(in.Subject)
				before = func(context.Context) { lim.ForgetDenials(subject) }
			}
		}
		if before == nil || lim == nil {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&beforeSuccess{ResponseWriter: w, ctx: r.Context(), before: before}, r)
	})
}

// beforeSuccess runs before once, ahead of a 2xx status line, so the
// client sees the answer only after what it changed holds here.
type beforeSuccess struct {
	http.ResponseWriter
	ctx    context.Context
	before func(context.Context)
	done   bool
}

func (b *beforeSuccess) WriteHeader(status int) {
	if !b.done {
		b.done = true
		if status >= 200 && status < 300 {
			b.before(b.ctx)
		}
	}
	b.ResponseWriter.WriteHeader(status)
}

func (b *beforeSuccess) Write(p []byte) (int, error) {
	if !b.done {
		b.WriteHeader(http.StatusOK)
	}
	return b.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (b *beforeSuccess) Unwrap() http.ResponseWriter { return b.ResponseWriter }
