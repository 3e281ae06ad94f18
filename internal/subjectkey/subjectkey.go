// Package subjectkey keeps the record of which subject hash key names a
// deployment's buckets: <prefix>{rules}:subject-key in Redis, next to the
// rules snapshot, holding the key's id (never the key).
//
// Every process that names a subject's buckets (the deployment's
// functions, an embedded ratelimit.Limiter) must hash subjects under the
// same key, or each acts on buckets the others never see: a reset or a
// refund answers 204 while the subject stays denied. So the deployment,
// which holds the key, writes the record (Deploy: migrate at each deploy,
// the admin API, sluice local); a limiter only compares, and compares
// again later (Check), so a fix is seen without a restart; and a
// deliberate key change is a compare-and-set from the id recorded
// (Rotate). A record written by a process without a key gives way to the
// deployment's keyed one. Every refusal names its fix, and Recovery the
// page that explains it.
package subjectkey

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// idInput is what a key id is the HMAC of. Its NUL can be in no subject
// (every entry refuses control characters), so a key id is never the hash
// of a subject.
const idInput = "\x00sluice subject key id"

// ID returns the id of a subject hash key: the first 16 bytes of
// HMAC-SHA256(key, "\0sluice subject key id"), in hex. It tells two keys
// apart without revealing either; nil and empty keys share Unkeyed.
func ID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(idInput))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// Unkeyed is the id of the empty key: a process without SUBJECT_HMAC_KEY.
var Unkeyed = ID(nil)

// Key returns the Redis key of the record for prefix.
func Key(prefix string) string { return prefix + "{rules}:subject-key" }

// Recovery is the documentation of every refusal's fix.
const Recovery = "docs/SECURITY.md#subject-hash-key"

// ErrMismatch is wrapped by every refusal: the record names another key
// than the process's own.
var ErrMismatch = errors.New("subject hash key differs from the one that names the buckets")

// MismatchError is a refusal: the record holds Recorded, the process's
// key has id Own. Its message names the fix.
type MismatchError struct {
	Key, Recorded, Own string
}

func (e *MismatchError) Error() string {
	what := fmt.Sprintf("%s records key id %s, this process's key has id %s", e.Key, e.Recorded, e.Own)
	fix := "give this process the deployment's key (SUBJECT_HMAC_KEY_SECRET_ARN or SUBJECT_HMAC_KEY)"
	switch {
	case e.Own == Unkeyed:
		what = fmt.Sprintf("%s records key id %s, and this process has no subject hash key", e.Key, e.Recorded)
	case e.Recorded == Unkeyed:
		what = fmt.Sprintf("%s records that the buckets are named without a key, and this process has one (id %s)", e.Key, e.Own)
		fix = "the deployment's next deploy or admin write records its key over it (or now: aws lambda invoke --function-name <migrate> /dev/stdout), or give this process no key"
	default:
		fix += ", or, if the deployment's key was changed on purpose (every bucket starts full), record it: " + RotateCommand(e.Recorded)
	}
	return fmt.Sprintf("%v: %s: %s; see %s", ErrMismatch, what, fix, Recovery)
}

func (e *MismatchError) Unwrap() error { return ErrMismatch }

// RotateCommand is the command that records a deployment's key in place of
// the id from: its migrate function invoked with {"subjectKeyFrom": from}
// (sluice local: --subject-key-from).
func RotateCommand(from string) string {
	return fmt.Sprintf(`aws lambda invoke --function-name <migrate> --cli-binary-format raw-in-base64-out --payload '{"subjectKeyFrom":"%s"}' /dev/stdout`, from)
}

// ErrChanged is returned by Rotate when the record no longer holds the id
// to rotate from.
var ErrChanged = errors.New("subject-key record changed")

//go:embed cas.lua
var casLua string

// casScript is cas.lua.
var casScript = redis.NewScript(casLua)

// client is the Redis calls a Record makes.
type client interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
}

// Record is one process's view of its deployment's record: the Redis
// and key prefix the buckets live under, and its own key's id. It is safe
// for concurrent use.
type Record struct {
	rdb     client
	key, id string
	timeout time.Duration
}

// DefaultTimeout is the budget of one Record call when New is given 0.
const DefaultTimeout = time.Second

// New returns the record under prefix on rdb for a process whose subject
// hash key is key (nil: none); each call is bounded by timeout (0:
// DefaultTimeout).
func New(rdb client, prefix string, key []byte, timeout time.Duration) *Record {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Record{rdb: rdb, key: Key(prefix), id: ID(key), timeout: timeout}
}

// ID returns the id of the process's key.
func (r *Record) ID() string { return r.id }

// Check compares the record with the process's key, with one GET: nil
// when it holds the key's id or nothing (no deployment has written one:
// nothing to compare with), a *MismatchError when it holds another id,
// any other error when Redis did not answer. It writes nothing.
func (r *Record) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	got, err := r.rdb.Get(ctx, r.key).Result()
	switch {
	case errors.Is(err, redis.Nil) || err == nil && got == r.id:
		return nil
	case err != nil:
		return fmt.Errorf("subjectkey: read %s: %w", r.key, err)
	}
	return &MismatchError{Key: r.key, Recorded: got, Own: r.id}
}

// Outcome is what Deploy did.
type Outcome string

const (
	// Recorded: there was no record; it now holds the key's id.
	Recorded Outcome = "recorded"
	// Kept: the record held the key's id already.
	Kept Outcome = "kept"
	// Replaced: the record held Unkeyed, written by a process without a
	// key; it now holds the deployment's keyed id.
	Replaced Outcome = "replaced"
)

// Deploy writes the record as the deployment does: the key's id where
// there is none, or where a process without a key wrote one (Replaced),
// with one script call. Another key's id is left as it is and returned
// as a *MismatchError: changing it is Rotate's, on purpose.
func (r *Record) Deploy(ctx context.Context) (Outcome, error) {
	expect := []any{r.id, "", r.id}
	if r.id != Unkeyed {
		expect = append(expect, Unkeyed)
	}
	before, set, err := r.cas(ctx, expect)
	switch {
	case err != nil:
		return "", err
	case !set:
		return "", &MismatchError{Key: r.key, Recorded: before, Own: r.id}
	case before == r.id:
		return Kept, nil
	case before == "":
		return Recorded, nil
	}
	return Replaced, nil
}

// Rotate records the key's id in place of from, the id recorded before a
// deliberate change of the deployment's key (every bucket starts full),
// as a compare-and-set: when the record holds anything else (another
// rotation came first, or from was mistyped) it is left as it is and
// ErrChanged is returned, saying what it holds. Rotating to the id
// already recorded is nil.
func (r *Record) Rotate(ctx context.Context, from string) error {
	before, set, err := r.cas(ctx, []any{r.id, from, r.id})
	switch {
	case err != nil:
		return err
	case !set:
		return fmt.Errorf("%w: %s holds %q, not %q: nothing rotated; see %s", ErrChanged, r.key, before, from, Recovery)
	}
	return nil
}

// cas runs cas.lua: argv is the id to record, then the values it may
// replace.
func (r *Record) cas(ctx context.Context, argv []any) (before string, set bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := casScript.Run(ctx, r.rdb, []string{r.key}, argv...).Slice()
	if err != nil {
		return "", false, fmt.Errorf("subjectkey: write %s: %w", r.key, err)
	}
	if len(res) != 2 {
		return "", false, fmt.Errorf("subjectkey: write %s: reply %v", r.key, res)
	}
	before, _ = res[0].(string)
	n, _ := res[1].(int64)
	return before, n == 1, nil
}
