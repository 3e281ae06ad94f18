package cdn

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
)

// Keys names the Redis keys of the edge tier under a prefix.
type Keys struct {
	// Out is the outbox: a hash of store key to the value to put, or ""
	// to delete; the Publisher drains it.
	Out string
	// Live is a hash of the keys the store holds to "<rule id> <rule
	// fingerprint>", and Expiry a sorted set of them by expiry (Unix
	// seconds): the Sweeper's and the rule reconciler's index.
	Live, Expiry string
	// Rules is a hash of rule id to fingerprint as last reconciled.
	Rules string
}

// KeysFor returns the edge tier's keys under the limiter's prefix, in
// one Redis Cluster slot (the {edge} hash tag): the Publisher's
// acknowledgement is one script over three of them.
func KeysFor(prefix string) Keys {
	p := prefix + "{edge}:"
	return Keys{Out: p + "out", Live: p + "live", Expiry: p + "exp", Rules: p + "rules"}
}

// RecorderOptions configure a Recorder. Each default is written on its
// field.
type RecorderOptions struct {
	// EdgeKey is the key subjects are hashed with at the edge (EDGE_KEY);
	// required.
	EdgeKey string
	// Prefix starts the Redis keys; default "sluice:".
	Prefix string
	// Log receives failed writes; default slog.Default().
	Log *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// A Recorder's fixed settings.
const (
	// recordEvery is the least time between two records of one subject
	// by this process. A denied subject's next denials cost a map lookup
	// until then.
	recordEvery = 10 * time.Second
	// recordTimeout bounds one Redis write.
	recordTimeout = time.Second
	// recordQueue is how many records may wait for the writer. Past it a
	// record is dropped: the edge knows less, nothing else.
	recordQueue = 1024
)

// Recorder records the authorizer's long denials in the Redis outbox.
// Its Denied is the core's authorizer.Options.Denied: it never blocks the
// request, and costs one HSET per denied subject per recordEvery per
// process, written by a goroutine of its own.
type Recorder struct {
	rdb  redis.UniversalClient
	keys Keys
	o    RecorderOptions

	mu   sync.Mutex
	seen map[string]time.Time // store key → when last recorded
	q    chan record
	done chan struct{}
}

// record is one HSET of the outbox, or, with flushed set, a mark the
// writer closes once it reaches it.
type record struct {
	key, value string
	flushed    chan struct{}
}

// NewRecorder returns a Recorder writing to rdb; Close stops its writer.
func NewRecorder(rdb redis.UniversalClient, o RecorderOptions) (*Recorder, error) {
	if o.EdgeKey == "" {
		return nil, fmt.Errorf("edge recorder: no edge key")
	}
	o.Prefix = cmp.Or(o.Prefix, "sluice:")
	o.Log = cmp.Or(o.Log, slog.Default())
	if o.Now == nil {
		o.Now = time.Now
	}
	r := &Recorder{rdb: rdb, keys: KeysFor(o.Prefix), o: o, seen: map[string]time.Time{},
		q: make(chan record, recordQueue), done: make(chan struct{})}
	go r.write()
	return r, nil
}

// Close stops the writer after the records queued so far.
func (r *Recorder) Close() {
	close(r.q)
	<-r.done
}

// Flush returns once the writer has written (or failed to write) every
// record queued before the call, or with ctx's error when ctx ends first.
// It must not be called after Close.
func (r *Recorder) Flush(ctx context.Context) error {
	mark := make(chan struct{})
	select {
	case r.q <- record{flushed: mark}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-mark:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Recorder) write() {
	defer close(r.done)
	for rec := range r.q {
		if rec.flushed != nil {
			close(rec.flushed)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
		err := r.rdb.HSet(ctx, r.keys.Out, rec.key, rec.value).Err()
		cancel()
		if err != nil {
			r.o.Log.Warn("edge denial not recorded: the edge will not know it", slog.Any("error", err))
		}
	}
}

// Fingerprint names a rule's numbers and scope: an entry made under one
// is dropped from the store once the rule no longer has it.
func Fingerprint(e *rules.Effective) string {
	s := fmt.Sprintf("%s|%s|%s|%s|%s|%d|%d|%d|%d|%s|%d|%d|%s|%s|%d",
		e.ID, e.API, e.Route, e.Subject, e.Plan, e.Limit, e.Burst, e.Cost, e.Period, e.Kind,
		e.Anchor.Unix(), e.MinRemaining, e.Mode, e.GlobalKey, e.Expires.Unix())
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// Edgeable reports whether res, a denial made by a rule (not failed
// closed), holds for every request of its subject on its API until its
// RetryAfter, so that the edge may deny them all: an API-wide rule that is
// neither the default rule nor global, in the default dimension, of a
// subject read from a header, a query parameter or the API key, where no
// cheaper request could pass sooner (the rule blocks, the request cost
// the least a request can, or a quota's window is spent).
func Edgeable(res *authorizer.Result) bool {
	e := res.Effective
	if res.Allowed || e == nil || res.Default || res.FailClosed || e.Mode == rules.Shadow ||
		e.Route != rules.Wildcard || e.GlobalKey != "" ||
		(res.Dimension != identity.DefaultDimension && res.Dimension != "") {
		return false
	}
	switch res.DimensionSource {
	case identity.SourceHeader, identity.SourceQuery, identity.SourceAPIKey:
	default:
		return false
	}
	return e.Blocked() || res.Cost == 1 || (e.Kind == rules.Quota && res.Remaining <= 0)
}

// Denied records res, a denial on api, when it is Edgeable, at least
// MinRetryAfter long and its subject Eligible. It is safe for concurrent
// use and never blocks.
func (r *Recorder) Denied(api string, res *authorizer.Result) {
	if res.RetryAfter < MinRetryAfter || !Edgeable(res) || !Eligible(res.DimensionSubject) {
		return
	}
	now := r.o.Now()
	key := Key(r.o.EdgeKey, res.DimensionSubject)
	r.mu.Lock()
	if t, ok := r.seen[key]; ok && now.Sub(t) < recordEvery {
		r.mu.Unlock()
		return
	}
	if len(r.seen) >= 4*recordQueue { // forget the oldest lazily: a bound, not an LRU
		maps.DeleteFunc(r.seen, func(_ string, t time.Time) bool { return now.Sub(t) >= recordEvery })
	}
	r.seen[key] = now
	r.mu.Unlock()

	e := res.Effective
	exp := now.Add(res.RetryAfter)
	if !e.Expires.IsZero() && e.Expires.Before(exp) {
		exp = e.Expires
	}
	ent := Entry{Expires: exp.Unix(), ResetAt: now.Add(res.Reset).Add(time.Second - 1).Unix(), Remaining: max(res.Remaining, 0), API: api, Rule: e.ID,
		Limit: res.Limit, Policy: res.Policy(), Name: e.PolicyName}
	v, err := ent.Encode()
	if err != nil {
		r.o.Log.Warn("edge denial not recorded", slog.Any("error", err))
		return
	}
	select {
	case r.q <- record{key: key, value: Fingerprint(e) + " " + strconv.FormatInt(ent.Expires, 10) + " " + v}:
	default: // the writer is behind: the edge knows less
	}
}

// Forget deletes subject's entry at once at the source: the outbox holds
// its delete, which the Publisher sends next (an admin reset).
func (r *Recorder) Forget(ctx context.Context, subject string) error {
	key := Key(r.o.EdgeKey, subject)
	r.mu.Lock()
	delete(r.seen, key)
	r.mu.Unlock()
	if err := r.rdb.HSet(ctx, r.keys.Out, key, "").Err(); err != nil {
		return fmt.Errorf("forget the edge entry: %w", err)
	}
	return nil
}
