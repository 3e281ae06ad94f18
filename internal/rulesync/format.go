package rulesync

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// An encoded snapshot is
//
//	magic    4 bytes  "SLR2" signed (format 2), "SLR1" unsigned (format 1)
//	version  8 bytes  the set's Version, big-endian
//	sum     32 bytes  SHA-256 of body
//	sig     64 bytes  format 2 only: Ed25519 over signContext, magic, version, sum
//	body              gzip of the JSON {"rules": [...], "plans": [...]};
//	                  empty: the version was published without its rules
//	                  (too large: load them from the store)
//
// The rules and plans are those of the admin API less what authorizers do
// not use: descriptions and timestamps. A newer format gets a new magic;
// an authorizer that does not know it loads from the database instead.
const (
	magicSigned   = "SLR2"
	magicUnsigned = "SLR1"
	// sumEnd is where the checksum ends: what the signature covers.
	sumEnd = len(magicSigned) + 8 + sha256.Size
	// headerSigned and headerUnsigned are the two formats' header sizes.
	headerSigned   = sumEnd + ed25519.SignatureSize
	headerUnsigned = sumEnd
	// maxDecoded bounds the JSON a snapshot may inflate to (64 MiB; 10,000
	// rules take about 3 MB), so that a corrupt or hostile value cannot
	// exhaust an authorizer's memory.
	maxDecoded = 64 << 20
)

// signContext starts every signed message, so that a signature made for
// a rules snapshot means nothing anywhere else.
const signContext = "sluice rules snapshot\n"

// ErrCorrupt is wrapped by the errors of a snapshot that cannot be decoded:
// unknown format, truncated, checksum mismatch, bad gzip or JSON.
var ErrCorrupt = errors.New("rules snapshot unreadable")

// ErrRefused is wrapped by the errors of a snapshot or version a decider
// must not act on, whoever wrote it: unsigned or signed with another key
// where a public key is configured, or a version from the future (more
// than SnapshotsOptions.MaxAhead past the clock). Any process holding
// Redis can write one; only a rule writer can sign.
var ErrRefused = errors.New("rules snapshot refused")

// NewSigningKey returns the Ed25519 key of the rule writers derived from
// secret, the bytes of RULES_SIGNING_KEY or its Secrets Manager secret:
// the seed is secret's SHA-256, so that any secret of at least 32 random
// bytes (a generated password) is a key.
func NewSigningKey(secret []byte) ed25519.PrivateKey {
	seed := sha256.Sum256(secret)
	return ed25519.NewKeyFromSeed(seed[:])
}

// FormatPublicKey is pub as RULES_PUBLIC_KEY spells it: standard base64.
func FormatPublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// body is what the JSON holds.
type body struct {
	Rules []rules.Rule `json:"rules"`
	Plans []rules.Plan `json:"plans"`
}

// encode returns the encoded form of set, signed with key (unsigned, format
// 1, when key is nil).
func encode(set rules.Set, key ed25519.PrivateKey) ([]byte, error) {
	b := body{Rules: make([]rules.Rule, len(set.Rules)), Plans: make([]rules.Plan, len(set.Plans))}
	for i, r := range set.Rules {
		r.Description, r.CreatedAt, r.UpdatedAt = "", time.Time{}, time.Time{}
		b.Rules[i] = r
	}
	for i, p := range set.Plans {
		p.Description, p.CreatedAt, p.UpdatedAt = "", time.Time{}, time.Time{}
		b.Plans[i] = p
	}
	var z bytes.Buffer
	z.Write(make([]byte, headerSize(key)))
	zw, err := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return nil, fmt.Errorf("encode rules snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress rules snapshot: %w", err)
	}
	return seal(z.Bytes(), set.Version, key), nil
}

// headerSize is the header size of the format key writes.
func headerSize(key ed25519.PrivateKey) int {
	if key == nil {
		return headerUnsigned
	}
	return headerSigned
}

// seal writes the header of out, whose body follows headerSize(key)
// bytes of room: magic, version, checksum and, with key, the signature.
func seal(out []byte, version int64, key ed25519.PrivateKey) []byte {
	n := headerSize(key)
	copy(out, magicUnsigned)
	if key != nil {
		copy(out, magicSigned)
	}
	binary.BigEndian.PutUint64(out[len(magicSigned):], uint64(version))
	sum := sha256.Sum256(out[n:])
	copy(out[len(magicSigned)+8:], sum[:])
	if key != nil {
		copy(out[sumEnd:], ed25519.Sign(key, signed(out[:sumEnd])))
	}
	return out
}

// signed is the message a signature covers.
func signed(head []byte) []byte { return append([]byte(signContext), head...) }

// check reads and checks an encoded snapshot's header (b may stop after
// it): its magic, the version, at least 1 and not after latest (refused);
// with pub, a signature by pub (refused otherwise). It returns the version
// and the header's size.
func check(b []byte, pub ed25519.PublicKey, latest int64) (int64, int, error) {
	size := headerUnsigned
	switch {
	case len(b) >= headerSigned && string(b[:len(magicSigned)]) == magicSigned:
		size = headerSigned
	case len(b) < headerUnsigned || string(b[:len(magicUnsigned)]) != magicUnsigned:
		return 0, 0, fmt.Errorf("%w: no %s or %s header", ErrCorrupt, magicSigned, magicUnsigned)
	}
	v := int64(binary.BigEndian.Uint64(b[len(magicSigned):]))
	switch {
	case v < 1:
		return 0, 0, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	case pub != nil && size != headerSigned:
		return 0, 0, fmt.Errorf("%w: version %d is not signed, and RULES_PUBLIC_KEY requires a rule writer's signature", ErrRefused, v)
	case pub != nil && !ed25519.Verify(pub, signed(b[:sumEnd]), b[sumEnd:headerSigned]):
		return 0, 0, fmt.Errorf("%w: version %d is not signed by the rule writers' key (RULES_PUBLIC_KEY)", ErrRefused, v)
	case latest > 0 && v > latest:
		return 0, 0, fmt.Errorf("%w: version %d is from the future (%s ahead of this clock)", ErrRefused, v, ahead(v, latest))
	}
	return v, size, nil
}

// ahead is how far version v is past latest (both versions, microseconds
// since 1970), for an error message.
func ahead(v, latest int64) string {
	d := time.Duration(v-latest) * time.Microsecond
	if d < 0 || d > 100*365*24*time.Hour { // beyond what a Duration spells clearly
		return "more than 100 years"
	}
	return "over " + d.Round(time.Second).String()
}

// decode checks and decodes an encoded snapshot (check: pub and latest).
// Errors wrap ErrCorrupt or ErrRefused, or rules.ErrNotFound for a version
// published without its rules.
func decode(b []byte, pub ed25519.PublicKey, latest int64) (rules.Set, error) {
	v, size, err := check(b, pub, latest)
	if err != nil {
		return rules.Set{}, err
	}
	sum := sha256.Sum256(b[size:])
	if !bytes.Equal(sum[:], b[len(magicSigned)+8:sumEnd]) {
		return rules.Set{}, fmt.Errorf("%w: checksum mismatch (version %d, %d bytes)", ErrCorrupt, v, len(b))
	}
	if len(b) == size {
		return rules.Set{}, fmt.Errorf("version %d was published without its rules (too large): %w", v, rules.ErrNotFound)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b[size:]))
	if err != nil {
		return rules.Set{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return rules.Set{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if len(raw) > maxDecoded {
		return rules.Set{}, fmt.Errorf("%w: inflates past %d bytes", ErrCorrupt, maxDecoded)
	}
	var out body
	if err := json.Unmarshal(raw, &out); err != nil {
		return rules.Set{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return rules.Set{Version: v, Rules: out.Rules, Plans: out.Plans}, nil
}
