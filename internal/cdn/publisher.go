package cdn

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/rules"
)

// ErrConflict is what a Store's Update returns when the ETag it was given
// is no longer the store's: another writer went first.
var ErrConflict = errors.New("key value store changed since its ETag was read")

// Store is the KeyValueStore as the Publisher writes it: the AWS client
// (internal/cdn/kvs) in a stack, a MemoryStore locally.
type Store interface {
	// ETag returns the store's current ETag.
	ETag(ctx context.Context) (string, error)
	// Update puts and deletes at most MaxBatch keys in all, if the store's
	// ETag is still etag (else ErrConflict), and returns the new ETag.
	Update(ctx context.Context, etag string, puts map[string]string, deletes []string) (string, error)
}

//go:embed ack.lua
var ackLua string

var ack = redis.NewScript(ackLua)

// PublisherOptions configure a Publisher. Each default is on its field.
type PublisherOptions struct {
	// Prefix starts the Redis keys; default "sluice:".
	Prefix string
	// Rules, when set, returns the current rules: Reconcile drops the
	// entries of a rule that changed or went, and of an API-wide rule a
	// new one may override for its subjects. Nil: entries only expire.
	Rules func(ctx context.Context) ([]rules.Effective, error)
	// Log receives failed rounds; default slog.Default().
	Log *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// RulesOf is a PublisherOptions.Rules reading the rules set load returns
// (the rules snapshot's LoadAll), each as the authorizers apply it.
func RulesOf(load func(context.Context) (rules.Set, error)) func(context.Context) ([]rules.Effective, error) {
	return func(ctx context.Context) ([]rules.Effective, error) {
		set, err := load(ctx)
		if err != nil {
			return nil, err
		}
		return rules.NewSnapshot(set.Rules, set.Plans, rules.SnapshotOptions{}).Rules(), nil
	}
}

// Publisher drains the outbox into the store and sweeps it.
type Publisher struct {
	rdb   redis.UniversalClient
	store Store
	keys  Keys
	o     PublisherOptions
	etag  string
}

// NewPublisher returns a Publisher moving rdb's outbox into store.
func NewPublisher(rdb redis.UniversalClient, store Store, o PublisherOptions) *Publisher {
	o.Prefix = cmp.Or(o.Prefix, "sluice:")
	o.Log = cmp.Or(o.Log, slog.Default())
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Publisher{rdb: rdb, store: store, keys: KeysFor(o.Prefix), o: o}
}

// Round is what one Publish or Sweep did.
type Round struct {
	// Put and Deleted are the keys the store took; Dropped the puts left
	// out because the store is full.
	Put, Deleted, Dropped int
}

// op is one key of a batch.
type op struct {
	key, sent     string // sent: the outbox value, "-" when not from it
	value         string // "" deletes
	live, expires string
}

// Publish sends at most MaxBatch of the outbox's keys to the store in one
// update, then drops them from the outbox and indexes them.
func (p *Publisher) Publish(ctx context.Context) (Round, error) {
	fields, _, err := p.rdb.HScan(ctx, p.keys.Out, 0, "", MaxBatch).Result()
	if err != nil {
		return Round{}, fmt.Errorf("read the edge outbox: %w", err)
	}
	live, err := p.rdb.HLen(ctx, p.keys.Live).Result()
	if err != nil {
		return Round{}, fmt.Errorf("count the edge entries: %w", err)
	}
	var (
		ops     []op
		r       Round
		dropped []string
	)
	for i := 0; i+1 < len(fields) && len(ops) < MaxBatch; i += 2 {
		key, sent := fields[i], fields[i+1]
		if sent == "" {
			ops = append(ops, op{key: key, sent: sent})
			continue
		}
		fp, rest, _ := strings.Cut(sent, " ")
		exp, value, _ := strings.Cut(rest, " ")
		ent, err := DecodeEntry(value)
		if err != nil || len(key) != KeyLen {
			dropped = append(dropped, key) // unreadable: drop it
			continue
		}
		if int(live) >= Capacity {
			r.Dropped++
			dropped = append(dropped, key)
			continue
		}
		live++
		ops = append(ops, op{key: key, sent: sent, value: value, live: ent.Rule + " " + fp, expires: exp})
	}
	if len(dropped) > 0 {
		// Not sent: out of the outbox (a key the store holds already
		// stays until it is swept).
		if err := p.rdb.HDel(ctx, p.keys.Out, dropped...).Err(); err != nil {
			return r, fmt.Errorf("drop from the edge outbox: %w", err)
		}
	}
	if len(ops) == 0 {
		return r, nil
	}
	return p.apply(ctx, ops, r)
}

// apply sends ops in one update, retried once on a conflict with the
// store's new ETag, and acknowledges them.
func (p *Publisher) apply(ctx context.Context, ops []op, r Round) (Round, error) {
	puts := map[string]string{}
	var dels []string
	args := make([]any, 0, 4*len(ops))
	for _, o := range ops {
		if o.value == "" {
			dels = append(dels, o.key)
			args = append(args, o.key, o.sent, "", "0")
		} else {
			puts[o.key] = o.value
			args = append(args, o.key, o.sent, o.live, o.expires)
		}
	}
	for try := 0; ; try++ {
		if p.etag == "" {
			etag, err := p.store.ETag(ctx)
			if err != nil {
				return r, fmt.Errorf("read the store's ETag: %w", err)
			}
			p.etag = etag
		}
		etag, err := p.store.Update(ctx, p.etag, puts, dels)
		if errors.Is(err, ErrConflict) && try == 0 {
			p.etag = ""
			continue
		}
		if err != nil {
			p.etag = ""
			return r, fmt.Errorf("update the store (%d puts, %d deletes): %w", len(puts), len(dels), err)
		}
		p.etag = etag
		break
	}
	if err := ack.Run(ctx, p.rdb, []string{p.keys.Out, p.keys.Live, p.keys.Expiry}, args...).Err(); err != nil {
		return r, fmt.Errorf("acknowledge the edge batch: %w", err)
	}
	r.Put += len(puts)
	r.Deleted += len(dels)
	return r, nil
}

// Sweep deletes from the store at most MaxBatch entries that expired:
// the function already passes them, and the store must stay under its
// size.
func (p *Publisher) Sweep(ctx context.Context) (Round, error) {
	now := strconv.FormatInt(p.o.Now().Unix(), 10)
	keys, err := p.rdb.ZRangeByScore(ctx, p.keys.Expiry, &redis.ZRangeBy{Min: "-inf", Max: now, Count: MaxBatch}).Result()
	if err != nil {
		return Round{}, fmt.Errorf("read the expired edge entries: %w", err)
	}
	if len(keys) == 0 {
		return Round{}, nil
	}
	ops := make([]op, len(keys))
	for i, k := range keys {
		ops[i] = op{key: k, sent: "-"}
	}
	return p.apply(ctx, ops, Round{})
}

// Reconcile queues the delete of every entry whose rule changed or went,
// and of every entry of an API-wide rule with no subject that a rule
// added since may override (a subject's own rule, an API's own rule over
// a wildcard one). The deletes go out with the next Publish.
func (p *Publisher) Reconcile(ctx context.Context) (int, error) {
	if p.o.Rules == nil {
		return 0, nil
	}
	rs, err := p.o.Rules(ctx)
	if err != nil {
		return 0, fmt.Errorf("load the rules: %w", err)
	}
	known, err := p.rdb.HGetAll(ctx, p.keys.Rules).Result()
	if err != nil {
		return 0, fmt.Errorf("read the reconciled rules: %w", err)
	}
	now := map[string]string{}
	for i := range rs {
		now[rs[i].ID] = Fingerprint(&rs[i])
	}
	stale := map[string]bool{} // rule id → its entries go
	for id, fp := range known {
		if now[id] != fp {
			stale[id] = true
		}
	}
	for i := range rs {
		n := &rs[i]
		if _, old := known[n.ID]; old || n.Route != rules.Wildcard {
			continue
		}
		for j := range rs {
			o := &rs[j]
			if o.ID != n.ID && o.Route == rules.Wildcard && o.Subject == rules.Wildcard &&
				(o.API == n.API || o.API == rules.Wildcard) {
				stale[o.ID] = true
			}
		}
	}
	queued := 0
	if len(stale) > 0 {
		// The iterator yields each entry's key, then its "<rule> <fp>".
		it := p.rdb.HScan(ctx, p.keys.Live, 0, "", 500).Iterator()
		pipe := p.rdb.Pipeline()
		for it.Next(ctx) {
			key := it.Val()
			if !it.Next(ctx) {
				break
			}
			if rule, _, _ := strings.Cut(it.Val(), " "); stale[rule] {
				pipe.HSet(ctx, p.keys.Out, key, "")
				queued++
			}
		}
		if err := it.Err(); err != nil {
			return 0, fmt.Errorf("scan the edge entries: %w", err)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("queue the edge deletes: %w", err)
		}
	}
	pipe := p.rdb.TxPipeline()
	pipe.Del(ctx, p.keys.Rules)
	if len(now) > 0 {
		pipe.HSet(ctx, p.keys.Rules, now)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return queued, fmt.Errorf("record the reconciled rules: %w", err)
	}
	return queued, nil
}

// Run reconciles, publishes and sweeps every interval until ctx ends,
// draining the outbox while a round finds a full batch.
func (p *Publisher) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		p.Once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once is one round of Run: reconcile, publish until the outbox is
// drained (at most 100 batches), sweep until nothing expired is left
// (as many). Failures are logged; the next round retries.
func (p *Publisher) Once(ctx context.Context) (total Round) {
	if _, err := p.Reconcile(ctx); err != nil {
		p.o.Log.Warn("edge reconcile failed", slog.Any("error", err))
	}
	for _, step := range []func(context.Context) (Round, error){p.Publish, p.Sweep} {
		for range 100 {
			r, err := step(ctx)
			total.Put, total.Deleted, total.Dropped = total.Put+r.Put, total.Deleted+r.Deleted, total.Dropped+r.Dropped
			if err != nil {
				p.o.Log.Warn("edge publish failed", slog.Any("error", err))
				break
			}
			if r.Put+r.Deleted+r.Dropped < MaxBatch {
				break
			}
		}
	}
	return total
}
