package limiter

import (
	"crypto/sha256"
	"encoding"
	"encoding/hex"
)

// Hasher computes subject digests: HMAC-SHA256 under a per-deployment
// key, truncated to 16 bytes. With the key secret, a hash in a log line, a
// principalId or a Redis key name cannot be turned back into the subject
// by guessing (an IP address, a short user id). It is immutable and safe
// for concurrent use.
type Hasher struct {
	// inner and outer are SHA-256's state after the key padded to a block
	// and XORed with HMAC's ipad and opad (RFC 2104): restoring them saves
	// hashing those two blocks on every digest.
	inner, outer []byte
}

// NewHasher returns the Hasher of key; a key longer than SHA-256's 64-byte
// block is hashed first, as HMAC does. A nil or empty key is valid (the
// unkeyed default).
func NewHasher(key []byte) *Hasher {
	if len(key) > sha256.BlockSize {
		sum := sha256.Sum256(key)
		key = sum[:]
	}
	var ipad, opad [sha256.BlockSize]byte
	copy(ipad[:], key)
	copy(opad[:], key)
	for i := range ipad {
		ipad[i] ^= 0x36
		opad[i] ^= 0x5c
	}
	state := func(pad []byte) []byte {
		d := sha256.New()
		d.Write(pad)
		b, err := d.(encoding.BinaryMarshaler).MarshalBinary()
		if err != nil { // crypto/sha256 always can
			panic(err)
		}
		return b
	}
	return &Hasher{inner: state(ipad[:]), outer: state(opad[:])}
}

// SubjectHash returns the hex form of subject's digest, 32 lowercase hex
// characters: what names its Redis keys.
func (h *Hasher) SubjectHash(subject string) string {
	var b [32]byte
	appendSubjectHash(b[:0], h.digest(subject))
	return string(b[:])
}

// digest returns HMAC-SHA256(key, subject)[:16] without allocating,
// whatever the subject's length: []byte(subject) would copy a long subject
// to the heap first, and crypto/hmac allocates its two hashes per call.
func (h *Hasher) digest(subject string) subjectDigest { return hmacDigest(h, subject) }

// hmacDigest is digest of a string or of bytes (several subjects' digests,
// dimensions.go), neither converted to the other: a conversion copies.
func hmacDigest[T ~string | ~[]byte](h *Hasher, subject T) subjectDigest {
	var (
		sd  subjectDigest
		sum [sha256.Size]byte
		buf [256]byte
	)
	d := sha256.New()
	u := d.(encoding.BinaryUnmarshaler)
	_ = u.UnmarshalBinary(h.inner) // a state MarshalBinary made
	for s := subject; len(s) > 0; {
		n := copy(buf[:], s)
		d.Write(buf[:n])
		s = s[n:]
	}
	inner := d.Sum(sum[:0])
	_ = u.UnmarshalBinary(h.outer)
	d.Write(inner)
	copy(sd[:], d.Sum(sum[:0]))
	return sd
}

// appendSubjectHash appends the hex form of sd (SubjectHash) to dst.
func appendSubjectHash(dst []byte, sd subjectDigest) []byte {
	return hex.AppendEncode(dst, sd[:])
}
