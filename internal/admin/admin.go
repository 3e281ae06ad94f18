// Package admin is Sluice's admin API: create, read, update and delete rules
// and plans, read their audit history, and look at or reset a subject's live
// buckets.
//
// The package knows HTTP (methods, status codes, headers, RFC 9457 problem
// documents written by internal/httpapi) but not Lambda or AWS: a Request
// is an HTTP request already taken apart, a Response an HTTP response to
// put together. Two thin adapters feed it: internal/admin/apigw turns API
// Gateway proxy events into Requests (one Lambda per route), and
// Service.HTTPHandler serves every route over net/http for the local stack.
//
// Every write goes to the store (which validates versions and writes the
// audit row in the same transaction), then bumps the rules version in Redis
// so warm authorizers reload; that bump is best effort.
package admin

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// DefaultMaxBody is the largest request body accepted (64 KiB); larger
// bodies get 413.
const DefaultMaxBody = 64 << 10

// versionBumper moves the rules version authorizers poll
// (internal/store/redisversion.Counter).
type versionBumper interface {
	Bump(ctx context.Context) (int64, error)
}

// bucketKeeper reads and resets a subject's buckets (internal/limiter.Limiter).
type bucketKeeper interface {
	Peek(ctx context.Context, subject string, b []limiter.Bucket) ([]limiter.BucketState, error)
	Reset(ctx context.Context, subject string, b []limiter.Bucket) error
}

// Options configure a Service. The zero value is usable; each field's
// default is written on it.
type Options struct {
	// Logger receives one JSON line per failed request and per failed
	// version bump; default: discard.
	Logger *slog.Logger
	// MaxBody is the largest body accepted, in bytes; default
	// DefaultMaxBody (64 KiB).
	MaxBody int
	// BumpTimeout bounds the Redis version bump after a write; default 1s.
	// It is detached from the request's context: a write that committed
	// still announces itself when the caller has gone.
	BumpTimeout time.Duration
	// Default is the authorizers' configured default rule (their
	// DEFAULT_LIMIT), shown by GET /subjects/{subject}/limits and reset with
	// the subject's buckets; nil when requests no rule matches are allowed.
	Default *rules.Effective
}

// Service runs the admin operations. It is safe for concurrent use; build
// one at init and share it.
type Service struct {
	store       store.Store
	version     versionBumper
	buckets     bucketKeeper
	log         *slog.Logger
	maxBody     int
	bumpTimeout time.Duration
	def         *rules.Effective
}

// New returns a Service over st. version may be nil (no bump after writes:
// only for tests and tools); buckets may be nil, and then the /subjects
// routes answer 503.
func New(st store.Store, version versionBumper, buckets bucketKeeper, o Options) *Service {
	s := &Service{
		store:       st,
		version:     version,
		buckets:     buckets,
		log:         o.Logger,
		maxBody:     o.MaxBody,
		bumpTimeout: o.BumpTimeout,
		def:         o.Default,
	}
	if s.log == nil {
		s.log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	if s.bumpTimeout <= 0 {
		s.bumpTimeout = time.Second
	}
	return s
}

// bump announces a committed write to the authorizers. A failure is logged
// and swallowed: the write stands, and authorizers pick it up at their next
// full reload at the latest.
func (s *Service) bump(ctx context.Context, route string) {
	if s.version == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.bumpTimeout)
	defer cancel()
	if _, err := s.version.Bump(ctx); err != nil {
		s.log.WarnContext(ctx, "rules version bump failed; authorizers reload at their next full refresh",
			slog.String("route", route), slog.Any("error", err))
	}
}
