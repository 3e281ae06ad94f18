package rulesync

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

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
	// SigningKey, the rule writers' (NewSigningKey), signs what Publish
	// stores; its public half is PublicKey's default. Nil: Publish stores
	// unsigned snapshots, which deciders configured with a PublicKey
	// refuse. Only the admin-write and migrate functions hold it.
	SigningKey ed25519.PrivateKey
	// PublicKey, when set, is the only key whose snapshots LoadAll returns
	// and Publish defers to: an unsigned snapshot, or one signed by
	// another key, is refused (ErrRefused). Nil: snapshots are not
	// verified, and any process holding Redis can publish rules.
	PublicKey ed25519.PublicKey
	// MaxAhead is how far past this process's clock a version may be: a
	// version is microseconds since 1970, and one further ahead was not
	// written by a rule writer (Version and LoadAll refuse it; Publish
	// replaces it). Default DefaultMaxAhead (1h).
	MaxAhead time.Duration
}

// DefaultMaxAhead is SnapshotsOptions.MaxAhead's default: an hour, far
// past any clock skew between the database, which stamps versions, and a
// Lambda.
const DefaultMaxAhead = time.Hour

// maxPublishReads bounds how many times Publish reads the snapshot a
// concurrent publish keeps changing.
const maxPublishReads = 8

// Snapshots reads and publishes the rules snapshot and its version. It is
// safe for concurrent use.
type Snapshots struct {
	client              redis.UniversalClient
	versionKey, snapKey string
	maxBytes            int
	key                 ed25519.PrivateKey
	pub                 ed25519.PublicKey
	maxAhead            time.Duration
}

// NewSnapshots returns Snapshots on client configured by o.
func NewSnapshots(client redis.UniversalClient, o SnapshotsOptions) *Snapshots {
	o.Prefix = cmp.Or(o.Prefix, DefaultPrefix)
	orDefault(&o.MaxBytes, DefaultMaxBytes)
	if o.PublicKey == nil && o.SigningKey != nil {
		o.PublicKey = o.SigningKey.Public().(ed25519.PublicKey)
	}
	orDefault(&o.MaxAhead, DefaultMaxAhead)
	return &Snapshots{client: client, versionKey: o.Prefix + "{rules}:version", snapKey: o.Prefix + "{rules}:snapshot", maxBytes: o.MaxBytes,
		key: o.SigningKey, pub: o.PublicKey, maxAhead: o.MaxAhead}
}

// latest is the newest version s accepts now: MaxAhead past the clock.
func (s *Snapshots) latest() int64 { return time.Now().Add(s.maxAhead).UnixMicro() }

// Keys returns the names of the version key and the snapshot key.
func (s *Snapshots) Keys() (version, snapshot string) { return s.versionKey, s.snapKey }

// Version returns the published version: one GET of a short value. It is 0
// when none was published (or Redis lost it). A version more than MaxAhead
// past the clock is an error wrapping ErrRefused: no rule writer wrote it.
func (s *Snapshots) Version(ctx context.Context) (int64, error) {
	v, err := s.client.Get(ctx, s.versionKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get rules version %s: %w", s.versionKey, err)
	}
	if latest := s.latest(); v > latest {
		return 0, fmt.Errorf("rules version %s: %w: %d is from the future (%s ahead of this clock)", s.versionKey, ErrRefused, v, ahead(v, latest))
	}
	return v, nil
}

// LoadAll reads and decodes the published set: one GET. Errors: one
// wrapping rules.ErrNotFound when none is stored (or its version was
// published without it); one wrapping ErrRefused when a PublicKey is set
// and the rule writers did not sign it, or when its version is from the
// future; one wrapping ErrCorrupt when the value cannot be decoded; any
// other is Redis's.
func (s *Snapshots) LoadAll(ctx context.Context) (rules.Set, error) {
	b, err := s.client.Get(ctx, s.snapKey).Bytes()
	if errors.Is(err, redis.Nil) {
		return rules.Set{}, fmt.Errorf("no rules snapshot at %s: %w", s.snapKey, rules.ErrNotFound)
	}
	if err != nil {
		return rules.Set{}, fmt.Errorf("get rules snapshot %s: %w", s.snapKey, err)
	}
	set, err := decode(b, s.pub, s.latest())
	if err != nil {
		return rules.Set{}, fmt.Errorf("rules snapshot %s: %w", s.snapKey, err)
	}
	return set, nil
}

// Publish signs set with the SigningKey and stores it and its version, in
// one script, unless Redis holds a snapshot of that version or a newer one
// that Publish trusts: signed by the rule writers (with a PublicKey; any
// snapshot without one) and not from the future. A snapshot it does not
// trust is replaced, so that no process holding Redis can pin a version
// that refuses the rule writers' publishes; the error then wraps
// ErrRefused with published true (the caller says so: someone wrote it).
// It returns whether it wrote. A set whose encoding exceeds MaxBytes is
// published as its version alone (authorizers then load from the
// database), and the error wraps ErrTooLarge with published true.
func (s *Snapshots) Publish(ctx context.Context, set rules.Set) (published bool, err error) {
	if set.Version < 1 {
		return false, fmt.Errorf("publish rules snapshot: version %d, want >= 1", set.Version)
	}
	b, err := encode(set, s.key)
	if err != nil {
		return false, err
	}
	var tooLarge error
	if len(b) > s.maxBytes {
		tooLarge = fmt.Errorf("%w: %d rules, %d plans encode to %d bytes, over %d; published version %d without it",
			ErrTooLarge, len(set.Rules), len(set.Plans), len(b), s.maxBytes, set.Version)
		b = seal(make([]byte, headerSize(s.key)), set.Version, s.key) // the version without its rules
	}
	for range maxPublishReads {
		// The header tells the version and the signature; the script
		// writes only if it is still what was read.
		head, err := s.client.GetRange(ctx, s.snapKey, 0, int64(headerSigned-1)).Bytes()
		if err != nil && !errors.Is(err, redis.Nil) {
			return false, fmt.Errorf("publish rules snapshot %s: read the stored one: %w", s.snapKey, err)
		}
		var trusted int64
		var refused error
		if len(head) > 0 {
			if trusted, _, refused = check(head, s.pub, s.latest()); refused != nil {
				trusted = 0
			}
		}
		sum := sha1.Sum(head)
		res, err := publishScript.Run(ctx, s.client, []string{s.versionKey, s.snapKey}, strconv.FormatInt(set.Version, 10), b,
			strconv.FormatInt(trusted, 10), hex.EncodeToString(sum[:]), headerSigned).Int64Slice()
		if err != nil {
			return false, fmt.Errorf("publish rules snapshot %s: %w", s.snapKey, err)
		}
		if len(res) != 2 {
			return false, fmt.Errorf("publish rules snapshot %s: reply %v", s.snapKey, res)
		}
		switch res[0] {
		case 0:
			return false, nil
		case 1:
			if refused != nil {
				refused = fmt.Errorf("publish rules snapshot %s: replaced one the rule writers did not publish: %w", s.snapKey, refused)
			}
			return true, errors.Join(tooLarge, refused)
		}
		// Another publish landed between the read and the script.
	}
	return false, fmt.Errorf("publish rules snapshot %s: it changed on each of %d reads", s.snapKey, maxPublishReads)
}
