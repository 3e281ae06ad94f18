package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/cdn/kvs"
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/limiter"
)

// newEdgeRecorder returns the CDN edge's recorder of long denials on c's
// Redis (closed with c), or nil when cfg names no edge key.
func (c *clients) newEdgeRecorder(ctx context.Context, cfg config.Config, prefix string) (*cdn.Recorder, error) {
	key, err := config.EdgeKey(ctx, cfg)
	if err != nil || key == "" {
		return nil, err
	}
	rec, err := cdn.NewRecorder(c.Redis, cdn.RecorderOptions{EdgeKey: key, Prefix: prefix, Log: c.Log})
	if err != nil {
		return nil, err
	}
	c.onClose(rec.Close)
	return rec, nil
}

// edgeResets is the admin API's limiter, whose Reset of a subject's
// buckets (an admin reset) also deletes the subject's entry at the CDN
// edge when there is one: undo is immediate at the source.
type edgeResets struct {
	*limiter.Limiter
	edge *cdn.Recorder // nil: no edge
}

// Reset resets the buckets, then queues the edge entry's delete; an error
// fails the reset, which the caller may repeat.
func (r edgeResets) Reset(ctx context.Context, subject string, buckets []limiter.Bucket) error {
	if err := r.Limiter.Reset(ctx, subject, buckets); err != nil {
		return err
	}
	if r.edge == nil {
		return nil
	}
	return r.edge.Forget(ctx, subject)
}

// EdgePublisher is the graph of the edge publisher: the outbox in Redis,
// the rules snapshot its reconciler reads, and the KeyValueStore.
type EdgePublisher struct {
	clients
	// Publisher drains the outbox into the store and sweeps it.
	Publisher *cdn.Publisher
	// Interval is the time between two rounds of Handle, and Margin the
	// time Handle leaves before its deadline; default EdgeInterval and
	// EdgeMargin.
	Interval, Margin time.Duration
}

// EdgeOptions configure NewEdgePublisher beyond Options.
type EdgeOptions struct {
	// Store, when set, is written instead of the KeyValueStore
	// EDGE_STORE_ARN names (sluice local's in-memory store, tests).
	Store cdn.Store
	// Endpoint, when set, is the KeyValueStore data plane's URL (tests).
	Endpoint string
}

// NewEdgePublisher builds the edge publisher from cfg: Redis, and the
// KeyValueStore EDGE_STORE_ARN names (or eo.Store). Its reconciler reads
// the rules from the snapshot the rule writers publish to Redis.
func NewEdgePublisher(ctx context.Context, cfg config.Config, o Options, eo EdgeOptions) (p *EdgePublisher, err error) {
	p = &EdgePublisher{clients: start(cfg, &o), Interval: EdgeInterval, Margin: EdgeMargin}
	defer p.closeOnError(&err)
	if err := p.openRedis(ctx, cfg, &o); err != nil {
		return nil, err
	}
	st := eo.Store
	if st == nil {
		if cfg.EdgeStoreARN == "" {
			return nil, fmt.Errorf("edge publisher: EDGE_STORE_ARN is not set")
		}
		if st, err = kvs.Load(ctx, cfg.EdgeStoreARN, kvs.Options{Endpoint: eo.Endpoint}); err != nil {
			return nil, err
		}
	}
	p.Publisher = cdn.NewPublisher(p.Redis, st, cdn.PublisherOptions{Prefix: o.Prefix, Log: p.Log, Rules: cdn.RulesOf(p.Snapshots.LoadAll)})
	p.Log.Info("sluice ready", slog.Any("config", cfg), slog.Bool("edgePublisher", true))
	return p, nil
}

// EdgeInterval and EdgeMargin pace one invocation of the publisher's
// function, scheduled once a minute: a round every EdgeInterval until
// EdgeMargin before its deadline, so an entry waits at most about
// EdgeInterval in the outbox.
const (
	EdgeInterval = 5 * time.Second
	EdgeMargin   = 3 * time.Second
)

// Handle is the publisher function's handler for its scheduled event:
// rounds of Publisher.Once every Interval until Margin before ctx's
// deadline (one round without one). It returns the rounds' total;
// a failed round is logged and the next retries.
func (p *EdgePublisher) Handle(ctx context.Context) (cdn.Round, error) {
	var total cdn.Round
	deadline, ok := ctx.Deadline()
	for {
		r := p.Publisher.Once(ctx)
		total.Put, total.Deleted, total.Dropped = total.Put+r.Put, total.Deleted+r.Deleted, total.Dropped+r.Dropped
		if !ok || time.Until(deadline) < p.Margin+p.Interval {
			break
		}
		t := time.NewTimer(p.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return total, nil
		case <-t.C:
		}
	}
	p.Log.InfoContext(ctx, "edge published", slog.Int("put", total.Put), slog.Int("deleted", total.Deleted), slog.Int("dropped", total.Dropped))
	return total, nil
}
