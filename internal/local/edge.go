package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/cdn/edgejs"
	"github.com/sluicehq/sluice/internal/config"
	authapigw "github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/rules"
)

// EdgeInterval is how often sluice local --edge publishes the outbox to
// its store: the local part of the edge's false-deny bound (a reset
// frees a subject at the edge within it, plus a round).
const EdgeInterval = time.Second

// randomHex is n random bytes in hex. crypto/rand.Read fills b or
// crashes the program; it returns no error (Go 1.24).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// edge is sluice local's CDN edge (--edge): the CloudFront Function a
// stack deploys, generated the same way and run in goja, in front of the
// demo API's gateway. It reads an in-memory KeyValueStore that the real
// Publisher fills from the outbox the authorizer records into.
type edge struct {
	fn    *edgejs.Function
	store *cdn.MemoryStore
	next  http.Handler
	log   *slog.Logger
	seq   atomic.Int64
	// origin is ORIGIN_VERIFY, which the edge sends the gateway as the
	// distribution does (replacing the client's); "" sends none.
	origin string
}

// startEdge builds the edge and starts its publisher, which runs until
// ctx ends or stop, which waits for it. Config.front puts it in front of
// the gateway.
func startEdge(ctx context.Context, a *app.Local, cfg config.Config, api string) (e *edge, stop func(), err error) {
	if cfg.EdgeKey == "" {
		return nil, nil, fmt.Errorf("--edge: no EDGE_KEY")
	}
	src, err := cdn.Function(cdn.FunctionOptions{StoreID: "local", EdgeKey: string(cfg.EdgeKey), API: api,
		Sources: cfg.SubjectSources, Headers: cfg.RateLimitHeaders})
	if err != nil {
		return nil, nil, err
	}
	e = &edge{store: &cdn.MemoryStore{}, log: a.Log, origin: string(cfg.OriginVerify)}
	if e.fn, err = edgejs.Load(src, e.store.Get, nil); err != nil {
		return nil, nil, err
	}
	cache := a.Cache
	pub := cdn.NewPublisher(a.Redis, e.store, cdn.PublisherOptions{Prefix: cfg.RedisPrefix, Log: a.Log,
		Rules: func(ctx context.Context) ([]rules.Effective, error) { return cache.Snapshot(ctx).Rules(), nil }})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pub.Run(ctx, EdgeInterval)
	}()
	return e, func() { cancel(); <-done }, nil
}

// ServeHTTP runs the function on r: its 429 when it denies, else the
// gateway's answer. A function that fails passes the request, as the
// function itself passes what it cannot read.
func (e *edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	resp, err := e.fn.Handle(edgejs.ViewerEvent(r, fmt.Sprintf("edge-%d", e.seq.Add(1))))
	if err != nil {
		e.log.ErrorContext(r.Context(), "edge function failed: passing the request", slog.Any("error", err))
	}
	if resp == nil {
		if e.origin != "" {
			r.Header.Set(authapigw.OriginVerifyHeader, e.origin)
		}
		e.next.ServeHTTP(w, r)
		return
	}
	resp.Write(w)
}

// front is gw behind the edge when one runs (--edge), else gw.
func (c Config) front(gw http.Handler) http.Handler {
	if c.edge == nil {
		return gw
	}
	c.edge.next = gw
	return c.edge
}
