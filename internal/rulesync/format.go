package rulesync

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
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
//	magic    4 bytes  "SLR1": Sluice rules, format 1
//	version  8 bytes  the set's Version, big-endian
//	sum     32 bytes  SHA-256 of body
//	body              gzip of the JSON {"rules": [...], "plans": [...]}
//
// The rules and plans are those of the admin API less what authorizers do
// not use: descriptions and timestamps. A newer format gets a new magic;
// an authorizer that does not know it loads from the database instead.
const (
	magic      = "SLR1"
	headerSize = len(magic) + 8 + sha256.Size
	// maxDecoded bounds the JSON a snapshot may inflate to (64 MiB; 10,000
	// rules take about 3 MB), so that a corrupt or hostile value cannot
	// exhaust an authorizer's memory.
	maxDecoded = 64 << 20
)

// ErrCorrupt is wrapped by the errors of a snapshot that cannot be decoded:
// unknown format, truncated, checksum mismatch, bad gzip or JSON.
var ErrCorrupt = errors.New("rules snapshot unreadable")

// body is what the JSON holds.
type body struct {
	Rules []rules.Rule `json:"rules"`
	Plans []rules.Plan `json:"plans"`
}

// encode returns the encoded form of set.
func encode(set rules.Set) ([]byte, error) {
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
	z.Write(make([]byte, headerSize))
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
	out := z.Bytes()
	copy(out, magic)
	binary.BigEndian.PutUint64(out[len(magic):], uint64(set.Version))
	sum := sha256.Sum256(out[headerSize:])
	copy(out[len(magic)+8:], sum[:])
	return out, nil
}

// peekVersion returns the version in an encoded snapshot's header, without
// checking the rest.
func peekVersion(b []byte) (int64, error) {
	if len(b) < headerSize || string(b[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: no %s header", ErrCorrupt, magic)
	}
	return int64(binary.BigEndian.Uint64(b[len(magic):])), nil
}

// decode checks and decodes an encoded snapshot. Every error wraps
// ErrCorrupt.
func decode(b []byte) (rules.Set, error) {
	v, err := peekVersion(b)
	if err != nil {
		return rules.Set{}, err
	}
	if v < 1 {
		return rules.Set{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	sum := sha256.Sum256(b[headerSize:])
	if !bytes.Equal(sum[:], b[len(magic)+8:headerSize]) {
		return rules.Set{}, fmt.Errorf("%w: checksum mismatch (version %d, %d bytes)", ErrCorrupt, v, len(b))
	}
	zr, err := gzip.NewReader(bytes.NewReader(b[headerSize:]))
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
