package rulesync

import (
	"cmp"
	"crypto/ed25519"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// now is a version of the present: microseconds since 1970.
func now() int64 { return time.Now().UnixMicro() }

// TestSignedSnapshots: a decider configured with the rule writers' public
// key loads what they publish, and refuses what a process holding only
// Redis writes: an unsigned snapshot, one signed by another key, and a
// version from the future. The writers' next publish replaces each.
func TestSignedSnapshots(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	writerKey := NewSigningKey([]byte("the rule writers' secret, 32 bytes or more"))
	writer, rdb := newSnapshots(t, SnapshotsOptions{SigningKey: writerKey})
	vk, sk := writer.Keys()
	prefix := strings.TrimSuffix(vk, "{rules}:version")
	decider := NewSnapshots(rdb, SnapshotsOptions{Prefix: prefix, PublicKey: writerKey.Public().(ed25519.PublicKey)})
	// Processes that hold Redis but not the writers' key.
	unsigned := NewSnapshots(rdb, SnapshotsOptions{Prefix: prefix})
	forger := NewSnapshots(rdb, SnapshotsOptions{Prefix: prefix, SigningKey: NewSigningKey([]byte("a key of the forger's own, 32 bytes"))})

	v := now()
	if ok, err := writer.Publish(ctx, sampleSet(v, 3)); !ok || err != nil {
		t.Fatalf("writer Publish = %v, %v", ok, err)
	}
	if got, err := decider.LoadAll(ctx); err != nil || got.Version != v || len(got.Rules) != 3 {
		t.Fatalf("decider LoadAll = version %d, %d rules, %v; want the writer's", got.Version, len(got.Rules), err)
	}

	for _, tc := range []struct {
		name   string
		forge  func(version int64) error
		future bool
	}{
		{"unsigned", func(fv int64) error { return forged(unsigned.Publish(ctx, sampleSet(fv, 1))) }, false},
		{"another key", func(fv int64) error { return forged(forger.Publish(ctx, sampleSet(fv, 1))) }, false},
		{"another key, a huge version", func(fv int64) error {
			b, err := encode(sampleSet(math.MaxInt64/2, 1), forger.key)
			if err == nil {
				err = rdb.Set(ctx, sk, b, 0).Err()
			}
			if err == nil {
				err = rdb.Set(ctx, vk, strconv.FormatInt(math.MaxInt64/2, 10), 0).Err()
			}
			return err
		}, true},
		{"the version key alone, a huge version", func(int64) error {
			return rdb.Set(ctx, vk, strconv.FormatInt(math.MaxInt64/2, 10), 0).Err()
		}, true},
	} {
		v++
		if err := tc.forge(v + 10); err != nil {
			t.Fatalf("%s: forge: %v", tc.name, err)
		}
		if tc.future {
			if _, err := decider.Version(ctx); !errors.Is(err, ErrRefused) {
				t.Errorf("%s: decider Version() error = %v, want ErrRefused", tc.name, err)
			}
		}
		if set, err := decider.LoadAll(ctx); err == nil && len(set.Rules) == 1 {
			t.Errorf("%s: decider LoadAll = the forged set (version %d)", tc.name, set.Version)
		} else if !tc.future && !errors.Is(err, ErrRefused) && tc.name != "the version key alone, a huge version" {
			t.Errorf("%s: decider LoadAll error = %v, want ErrRefused", tc.name, err)
		}
		// The writers' next publish, older than the forged version, is
		// adopted all the same.
		ok, err := writer.Publish(ctx, sampleSet(v, 4))
		if !ok {
			t.Fatalf("%s: writer Publish after the forgery = %v, %v; want published", tc.name, ok, err)
		}
		if tc.name != "the version key alone, a huge version" && !errors.Is(err, ErrRefused) {
			t.Errorf("%s: writer Publish error = %v, want one naming the refused snapshot it replaced", tc.name, err)
		}
		if got, err := decider.Version(ctx); got != v || err != nil {
			t.Errorf("%s: decider Version() after the writer's publish = %d, %v; want %d", tc.name, got, err, v)
		}
		if got, err := decider.LoadAll(ctx); err != nil || got.Version != v || len(got.Rules) != 4 {
			t.Errorf("%s: decider LoadAll after the writer's publish = version %d, %d rules, %v; want the writer's", tc.name, got.Version, len(got.Rules), err)
		}
	}

	// An older set the writers signed, written back: no newer publish is
	// held back by it, and a decider holding the newer ignores its version.
	old, _ := encode(sampleSet(v-1, 2), writerKey)
	if err := rdb.Set(ctx, sk, old, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := writer.Publish(ctx, sampleSet(v+1, 5)); !ok || err != nil {
		t.Errorf("writer Publish over a replayed older set = %v, %v; want true, nil", ok, err)
	}
	// And an older publish never replaces the newer signed set.
	if ok, err := writer.Publish(ctx, sampleSet(v, 4)); ok || err != nil {
		t.Errorf("writer Publish of an older set = %v, %v; want false, nil", ok, err)
	}
}

// forged is a forger's Publish answer as an error: nil when it wrote (it
// may say it replaced a snapshot it did not trust either).
func forged(ok bool, err error) error {
	if ok {
		return nil
	}
	return cmp.Or(err, errors.New("not published"))
}

// TestSignedTooLarge: a version published without its rules is signed
// too, so it orders later publishes and a decider loads from the store.
func TestSignedTooLarge(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	key := NewSigningKey([]byte("the rule writers' secret, 32 bytes or more"))
	s, _ := newSnapshots(t, SnapshotsOptions{SigningKey: key, MaxBytes: 1500})
	v := now()
	if ok, err := s.Publish(ctx, sampleSet(v, 200)); !ok || !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Publish(200 rules) = %v, %v; want true, ErrTooLarge", ok, err)
	}
	if _, err := s.LoadAll(ctx); !errors.Is(err, rules.ErrNotFound) {
		t.Errorf("LoadAll() = %v, want rules.ErrNotFound", err)
	}
	if ok, err := s.Publish(ctx, sampleSet(v-1, 1)); ok || err != nil {
		t.Errorf("Publish(older) over the stub = %v, %v; want false, nil", ok, err)
	}
}

// TestSignatureCoversHeader: a changed version, checksum or magic in a
// signed snapshot is refused; a changed body with its old checksum is
// corrupt.
func TestSignatureCoversHeader(t *testing.T) {
	t.Parallel()
	key := NewSigningKey([]byte("the rule writers' secret, 32 bytes or more"))
	pub := key.Public().(ed25519.PublicKey)
	good, err := encode(sampleSet(now(), 3), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(good, pub, now()+1e9); err != nil {
		t.Fatalf("decode(good) = %v", err)
	}
	for name, at := range map[string]int{"version": len(magicSigned) + 7, "checksum": len(magicSigned) + 8, "signature": sumEnd + 3} {
		b := append([]byte(nil), good...)
		b[at] ^= 1
		if _, err := decode(b, pub, now()+1e9); !errors.Is(err, ErrRefused) {
			t.Errorf("decode(a flipped %s bit) = %v, want ErrRefused", name, err)
		}
	}
	b := append([]byte(nil), good...)
	b[len(b)-3] ^= 1
	if _, err := decode(b, pub, now()+1e9); !errors.Is(err, ErrCorrupt) {
		t.Errorf("decode(a flipped body bit) = %v, want ErrCorrupt", err)
	}
	// A signed snapshot read without a key configured is read as it is.
	if _, err := decode(good, nil, 0); err != nil {
		t.Errorf("decode(signed, no key) = %v", err)
	}
}

// FuzzDecodeSigned: whatever the bytes, a decider with a key gets the
// writers' set or an error, never another set.
func FuzzDecodeSigned(f *testing.F) {
	key := NewSigningKey([]byte("the rule writers' secret, 32 bytes or more"))
	pub := key.Public().(ed25519.PublicKey)
	good, err := encode(sampleSet(3, 3), key)
	if err != nil {
		f.Fatal(err)
	}
	unsignedGood, _ := encode(sampleSet(3, 3), nil)
	f.Add(good)
	f.Add(unsignedGood)
	f.Add(good[:headerSigned])
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := decode(b, pub, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrRefused) && !errors.Is(err, rules.ErrNotFound) {
				t.Errorf("decode error = %v, want ErrCorrupt, ErrRefused or rules.ErrNotFound", err)
			}
			return
		}
		if string(b) != string(good) {
			t.Errorf("decode accepted %d bytes that are not the writers' snapshot (version %d)", len(b), set.Version)
		}
	})
}
