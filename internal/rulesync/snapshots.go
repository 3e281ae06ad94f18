package rulesync

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/rules"
)

// DefaultPrefix starts both keys unless SnapshotsOptions say otherwise; it is the
// limiter's default prefix too.
const DefaultPrefix = "sl:"

// DefaultMaxBytes is the largest encoded snapshot stored unless SnapshotsOptions say
// otherwise: 8 MiB, some 20 times the 10,000 rules store.DefaultMaxRules
// allows. Redis takes values up to 512 MB; the bound is ours, because
// every authorizer reads the whole value on every reload.
const DefaultMaxBytes = 8 << 20

// ErrTooLarge is returned by Publish when the encoded set exceeded
// SnapshotsOptions.MaxBytes: the version was published without a snapshot, so
// authorizers load from the database.
var ErrTooLarge = errors.New("rules snapshot too large to store")

//go:embed publish.lua
var publishSource string

var publishScript = redis.NewScript(publishSource)

// SnapshotsOptions configure Snapshots. The zero value is usable; each field's
// default is written on it.
type SnapshotsOptions struct {
	// Prefix starts both keys; default DefaultPrefix ("sl:"). It must not
	// hold '{' or '}': the keys' own hash tag must be their first.
	Prefix string
	// MaxBytes is the largest encoded snapshot Publish stores; default
	// DefaultMaxBytes (8 MiB).
	MaxBytes int
}

// Snapshots reads and publishes the rules snapshot and its version. It is
// safe for concurrent use.
type Snapshots struct {
	client              redis.UniversalClient
	versionKey, snapKey string
	maxBytes            int
}

// NewSnapshots returns Snapshots on client configured by o.
func NewSnapshots(client redis.UniversalClient, o SnapshotsOptions) *Snapshots {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return &Snapshots{client: client, versionKey: o.Prefix + "{rules}:version", snapKey: o.Prefix + "{rules}:snapshot", maxBytes: o.MaxBytes}
}

// Keys returns the names of the version key and the snapshot key.
func (s *Snapshots) Keys() (version, snapshot string) { return s.versionKey, s.snapKey }

// Version returns the published version: one GET of a short value. It is 0
// when none was published (or Redis lost it).
func (s *Snapshots) Version(ctx context.Context) (int64, error) {
	v, err := s.client.Get(ctx, s.versionKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get rules version %s: %w", s.versionKey, err)
	}
	return v, nil
}

// LoadAll reads and decodes the published set: one GET. Errors: one
// wrapping rules.ErrNotFound when none is stored; one wrapping ErrCorrupt
// when the value cannot be decoded; any other is Redis's.
func (s *Snapshots) LoadAll(ctx context.Context) (rules.Set, error) {
	b, err := s.client.Get(ctx, s.snapKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return rules.Set{}, fmt.Errorf("no rules snapshot at %s: %w", s.snapKey, rules.ErrNotFound)
	}
	if err != nil {
		return rules.Set{}, fmt.Errorf("get rules snapshot %s: %w", s.snapKey, err)
	}
	set, err := decode(b)
	if err != nil {
		return rules.Set{}, fmt.Errorf("rules snapshot %s: %w", s.snapKey, err)
	}
	return set, nil
}

// Publish stores set and its version, in one script, unless Redis already
// holds that version or a newer one. It returns whether it wrote. A set
// whose encoding exceeds MaxBytes moves the version and deletes the stored
// snapshot (authorizers then load from the database), and the error wraps
// ErrTooLarge with published true.
func (s *Snapshots) Publish(ctx context.Context, set rules.Set) (published bool, err error) {
	if set.Version < 1 {
		return false, fmt.Errorf("publish rules snapshot: version %d, want >= 1", set.Version)
	}
	b, err := encode(set)
	if err != nil {
		return false, err
	}
	var (
		arg      any = b
		tooLarge error
	)
	if len(b) > s.maxBytes {
		tooLarge = fmt.Errorf("%w: %d rules, %d plans encode to %d bytes, over %d; published version %d without it",
			ErrTooLarge, len(set.Rules), len(set.Plans), len(b), s.maxBytes, set.Version)
		arg = ""
	}
	res, err := publishScript.Run(ctx, s.client, []string{s.versionKey, s.snapKey}, strconv.FormatInt(set.Version, 10), arg).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("publish rules snapshot %s: %w", s.snapKey, err)
	}
	if len(res) != 2 {
		return false, fmt.Errorf("publish rules snapshot %s: reply %v", s.snapKey, res)
	}
	if res[0] == 0 {
		return false, nil
	}
	return true, tooLarge
}
