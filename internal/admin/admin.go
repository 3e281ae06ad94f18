// Package admin is Sluice's admin API: create, read, update and delete rules
// and plans, read their audit history, and look at or reset a subject's live
// buckets.
//
// The package knows HTTP (methods, status codes, headers, RFC 9457 problem
// documents written by internal/httpapi) but not Lambda or AWS:
// Service.Handler is an http.Handler of the routes asked for. The admin
// Lambdas run it through internal/lambdahttp (each its own routes), and
// sluice local mounts it on its net/http server with every route.
//
// Every write goes to the store (which validates versions and writes the
// audit row in the same transaction), then publishes the committed rules to
// Redis (one LoadAll, one script) so warm authorizers reload from there and
// cold ones can start without the database; that publish is best effort.
package admin

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
	"github.com/sluicehq/sluice/internal/subjectkey"
)

// DefaultMaxBody is the largest request body accepted (64 KiB); larger
// bodies get 413.
const DefaultMaxBody = 64 << 10

// publisher stores the committed rules where authorizers read them, and
// moves the version they poll (internal/rulesync.Snapshots). It
// reports false, nil when a newer set was already published.
type publisher interface {
	Publish(ctx context.Context, set rules.Set) (bool, error)
}

// bucketKeeper reads, resets and charges usage to a subject's buckets
// (internal/limiter.Limiter).
type bucketKeeper interface {
	Peek(ctx context.Context, subject string, b []limiter.Bucket) ([]limiter.BucketState, error)
	Reset(ctx context.Context, subject string, b []limiter.Bucket) error
	Charge(ctx context.Context, subject string, b []limiter.Bucket, cost int64, scope, idempotencyKey string) (limiter.Usage, error)
	InFlight(ctx context.Context, subject string, b limiter.Bucket) (int64, error)
	SubjectHash(subject string) string
}

// keyRecord is the record of which subject hash key names the buckets
// (*subjectkey.Record), which the admin API, part of the deployment,
// writes.
type keyRecord interface {
	Deploy(ctx context.Context) (subjectkey.Outcome, error)
}

// Options configure a Service. The zero value is usable; each field's
// default is written on it.
type Options struct {
	// Logger receives one JSON line per failed request and per failed
	// publish; default: discard.
	Logger *slog.Logger
	// MaxBody is the largest body accepted, in bytes; default
	// DefaultMaxBody (64 KiB).
	MaxBody int
	// PublishTimeout bounds the publish after a write: reading every rule
	// back from the store and storing them in Redis, retried until it
	// succeeds; default DefaultPublishTimeout (8s: a Sentinel failover
	// fits, and the admin Lambdas' 10 s timeout still holds the write).
	// It is detached from the request's context: a write that committed
	// still announces itself when the caller has gone.
	PublishTimeout time.Duration
	// Default is the authorizers' configured default rule (their
	// DEFAULT_LIMIT), shown by GET /subjects/{subject}/limits and reset with
	// the subject's buckets; nil when requests no rule matches are allowed.
	Default *rules.Effective
	// Stats answers GET /stats: a *stats.Stats the local authorizer
	// records into, or the Contributor Insights reader of a deployed
	// stack; nil answers 503.
	Stats StatsReader
	// SubjectHash hashes a subject for POST /subjects/find when the
	// Service has no limiter: the admin-stats function holds the subject
	// hash key and the stats source, not Redis. Default: the
	// limiter's (nil without one: the route answers 503).
	SubjectHash func(subject string) string
	// SubjectKey is the record of the subject hash key naming the
	// buckets (a *subjectkey.Record), written after each publish and
	// before each read, reset or charge of buckets; nil writes none and
	// checks nothing (tests).
	SubjectKey keyRecord
}

// DefaultPublishTimeout is Options.PublishTimeout's default.
const DefaultPublishTimeout = 8 * time.Second

// publishRetry is the pause between two publish attempts.
const publishRetry = 250 * time.Millisecond

// Service runs the admin operations. It is safe for concurrent use; build
// one at init and share it.
type Service struct {
	store     store.Store
	snapshots publisher
	buckets   bucketKeeper
	o         Options // as New was given them, defaults filled
}

// New returns a Service over st. snapshots may be nil (nothing published
// after writes: only for tests and tools); buckets may be nil, and then the
// /subjects routes answer 503.
func New(st store.Store, snapshots publisher, buckets bucketKeeper, o Options) *Service {
	if o.SubjectHash == nil && buckets != nil {
		o.SubjectHash = buckets.SubjectHash
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = DefaultPublishTimeout
	}
	return &Service{store: st, snapshots: snapshots, buckets: buckets, o: o}
}

// publish announces a committed write to the authorizers: it reads the
// committed rules back from the store (one LoadAll a write, whatever the
// number of authorizers) and publishes them. Reading after the commit,
// rather than sending the one rule written, is what makes concurrent writes
// safe: the set read holds this write and every one committed before it,
// and its version orders it against the sets other writes publish.
//
// A failure is retried every publishRetry until the publish budget
// (PublishTimeout) runs out: a Redis failing over (Sentinel promotes a
// replica within seconds) or a database blip does not leave a committed
// change unannounced. What still fails is logged and swallowed: the write
// stands, and authorizers pick it up at the next write's publish, or their
// next full reload from the store at the latest.
func (s *Service) publish(ctx context.Context, route string) {
	if s.snapshots == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.PublishTimeout)
	defer cancel()
	var (
		set       rules.Set
		published bool
		loadErr   error
		err       error
	)
	for {
		if set, loadErr = s.store.LoadAll(ctx); loadErr == nil {
			if published, err = s.snapshots.Publish(ctx, set); err == nil || published {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(publishRetry):
			continue
		}
		break
	}
	switch {
	case loadErr != nil:
		s.o.Logger.WarnContext(ctx, "rules snapshot not published: reading the rules back failed; authorizers reload at their next full refresh",
			slog.String("route", route), slog.Any("error", loadErr))
	case err != nil && published:
		// The version moved, with a problem the error names: too large
		// to store (authorizers load the rules from the database), or it
		// replaced a snapshot the rule writers did not sign (a process
		// holding Redis wrote one).
		s.o.Logger.ErrorContext(ctx, "rules snapshot published with a problem",
			slog.String("route", route), slog.Int64("version", set.Version), slog.Any("error", err))
	case err != nil:
		s.o.Logger.WarnContext(ctx, "rules snapshot not published; authorizers reload at their next full refresh",
			slog.String("route", route), slog.Int64("version", set.Version), slog.Any("error", err))
	case !published:
		s.o.Logger.DebugContext(ctx, "rules snapshot not published: Redis holds a newer one",
			slog.String("route", route), slog.Int64("version", set.Version))
	}
	if err == nil {
		s.claimKeyAfterPublish(ctx, route)
	}
}
