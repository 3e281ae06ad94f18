// Package cdn is Sluice's edge tier: long denials pushed to a CloudFront
// KeyValueStore, where a CloudFront Function answers a blocked subject's
// 429 before the request reaches API Gateway.
//
// The edge only denies. It holds entries for subjects the authorizer
// denied for at least MinRetryAfter under an API-wide rule, each entry's
// value carrying its expiry, so a window rolling over needs no write; a
// miss, an expired entry or anything the function cannot read exactly
// passes the request to the authorizer, which decides as before. A
// forged identity can therefore only earn its sender a 429.
//
// Nothing here runs on the request path beyond a map lookup and a
// non-blocking send: the Recorder writes an entry to a Redis outbox in
// the background, the Publisher drains the outbox into the store in
// batches of at most MaxBatch conditioned on its ETag, and sweeps
// expired entries so that the store stays under its 5 MB.
package cdn

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The limits of CloudFront's KeyValueStore and Functions this package
// keeps within.
const (
	// MaxBatch is the most keys one UpdateKeys call may put and delete.
	MaxBatch = 50
	// MaxStoreBytes is a store's size: every key and value, in bytes.
	MaxStoreBytes = 5 << 20
	// MaxValueBytes bounds a value in the store.
	MaxValueBytes = 1024
	// MaxFunctionBytes bounds a CloudFront Function's code.
	MaxFunctionBytes = 10 << 10
)

// MinRetryAfter is the shortest denial worth sending to the edge:
// well above a write's propagation to the edge locations (measured at
// about 21 to 32 s), so that an entry is not stale before it arrives.
const MinRetryAfter = 60 * time.Second

// KeyLen is the length of an entry's key: 128 bits of HMAC-SHA256, in hex.
const KeyLen = 32

// MaxSubjectLen bounds a subject the edge hashes, as identity's
// MaxSubjectLen bounds one the authorizer charges.
const MaxSubjectLen = 256

// Key is the store's key of subject under the edge key: HMAC-SHA256
// truncated to 128 bits, in hex. The edge key is not the subject hash key
// of the Redis buckets, so reading the store reveals no subject and a
// leak of one key is not a leak of the other. The function computes the
// same with crypto.createHmac over the key's bytes.
func Key(edgeKey, subject string) string {
	m := hmac.New(sha256.New, []byte(edgeKey))
	m.Write([]byte(subject))
	return hex.EncodeToString(m.Sum(nil))[:KeyLen]
}

// Eligible reports whether the edge can read subject exactly as the
// authorizer does: printable ASCII, no comma (a repeated header joins
// with one), no '%' or '+' (a query value the gateway decodes), within
// MaxSubjectLen, already trimmed. The function applies the same test to
// what it reads and passes anything else to the authorizer.
func Eligible(subject string) bool {
	if subject == "" || len(subject) > MaxSubjectLen || strings.TrimSpace(subject) != subject {
		return false
	}
	for i := 0; i < len(subject); i++ {
		c := subject[i]
		if c < 0x20 || c > 0x7e || c == ',' || c == '%' || c == '+' {
			return false
		}
	}
	return true
}

// Entry is the value of one key in the store: what the function needs to
// answer the authorizer's 429 without asking it.
type Entry struct {
	// Expires is when the denial ends, Unix seconds: the function passes
	// the request from then on.
	Expires int64 `json:"e"`
	// ResetAt is when the limiting bucket is full again, Unix seconds.
	ResetAt int64 `json:"t"`
	// Remaining is the limiting bucket's whole tokens left.
	Remaining int64 `json:"m"`
	// API is the API Gateway API id the denial was made for.
	API string `json:"a"`
	// Rule is the limiting rule's id.
	Rule string `json:"r"`
	// Limit is the rule's tokens per period.
	Limit int64 `json:"l"`
	// Policy is the RateLimit-Policy field value.
	Policy string `json:"p"`
	// Name is the rule's RateLimit policy name, quoted ("\"<rule>\"").
	Name string `json:"n"`
}

// Encode is e as the store's value.
func (e Entry) Encode() (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	if len(b) > MaxValueBytes {
		return "", fmt.Errorf("edge entry of rule %s is %d bytes, over the store's %d", e.Rule, len(b), MaxValueBytes)
	}
	return string(b), nil
}

// DecodeEntry reads a value Encode wrote.
func DecodeEntry(v string) (Entry, error) {
	var e Entry
	if err := json.Unmarshal([]byte(v), &e); err != nil {
		return Entry{}, fmt.Errorf("decode edge entry: %w", err)
	}
	return e, nil
}

// entryBytes is the most one entry takes in the store: its key and a
// value with a 36-character rule id and API id and a long policy.
const entryBytes = KeyLen + 200

// Capacity is how many entries a store holds at most: MaxStoreBytes over
// entryBytes, about 22,000. The Publisher puts no more; past it the edge
// simply knows less, and the authorizer denies the rest as before.
const Capacity = MaxStoreBytes / entryBytes
