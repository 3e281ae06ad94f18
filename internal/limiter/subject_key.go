package limiter

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed subject_key.lua
var subjectKeyLua string

// subjectKeyScript records or reads the key id (subject_key.lua).
var subjectKeyScript = redis.NewScript(subjectKeyLua)

// keyIDInput is what a key id is the hash of. Its NUL can be in no subject
// (every entry refuses control characters), so a key id is never the hash
// of a subject.
const keyIDInput = "\x00sluice subject key id"

// unkeyedID is the key id of the empty key.
var unkeyedID = unkeyed.SubjectHash(keyIDInput)

// ErrSubjectKeyMismatch is returned by ClaimSubjectKey when the buckets
// under the Limiter's prefix are named by another subject hash key than
// its own.
var ErrSubjectKeyMismatch = errors.New("subject hash key differs from the one that names the buckets")

// SubjectKeyRecord returns the Redis key where the id of the subject hash
// key is recorded for prefix: <prefix>{rules}:subject-key, in the rules
// snapshot's slot.
func SubjectKeyRecord(prefix string) string { return prefix + "{rules}:subject-key" }

// KeyID returns the id of the Limiter's subject hash key: the first 16
// bytes of HMAC-SHA256(key, "\0sluice subject key id"), in hex. It tells
// two keys apart without revealing either; every Limiter without a key has
// the same one.
func (l *Limiter) KeyID() string { return l.hash.SubjectHash(keyIDInput) }

// ClaimSubjectKey makes sure the buckets under the Limiter's prefix are
// named with its subject hash key: it records the key's id
// (SubjectKeyRecord) when none is, and returns an error wrapping
// ErrSubjectKeyMismatch, which says which side has no key, when another
// is. It makes one Redis call, within the Limiter's Timeout. The first process to call it under a prefix decides for all;
// after a deliberate key change (every bucket starts full again) delete
// the record.
func (l *Limiter) ClaimSubjectKey(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	record := SubjectKeyRecord(l.prefix)
	own := l.KeyID()
	got, err := subjectKeyScript.Run(ctx, l.rdb, []string{record}, own).Text()
	if err != nil {
		return fmt.Errorf("limiter: read %s: %w", record, err)
	}
	if got == own {
		return nil
	}
	switch {
	case own == unkeyedID:
		return fmt.Errorf("%w: this process has no subject hash key (SUBJECT_HMAC_KEY or SUBJECT_HMAC_KEY_SECRET_ARN), and %s records a keyed one", ErrSubjectKeyMismatch, record)
	case got == unkeyedID:
		return fmt.Errorf("%w: %s records that the buckets are named without a key, and this process has one", ErrSubjectKeyMismatch, record)
	}
	return fmt.Errorf("%w: %s records key id %s, this process's key has id %s", ErrSubjectKeyMismatch, record, got, own)
}
