package subjectkey_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/subjectkey"
	"github.com/sluicehq/sluice/internal/testenv"
)

var keyA, keyB = []byte("subject-key-a-0123456789"), []byte("subject-key-b-0123456789")

// TestID: a key id is what the records written before this package hold
// (the limiter's hash of "\0sluice subject key id"), tells keys apart, and
// never holds the key.
func TestID(t *testing.T) {
	t.Parallel()
	for _, key := range [][]byte{nil, keyA, keyB, []byte(strings.Repeat("k", 100))} {
		if got, want := subjectkey.ID(key), limiter.NewHasher(key).SubjectHash("\x00sluice subject key id"); got != want {
			t.Errorf("ID(%q) = %s, want %s, the id records already hold", key, got, want)
		}
	}
	if subjectkey.ID(keyA) == subjectkey.ID(keyB) || subjectkey.ID(keyA) == subjectkey.Unkeyed || len(subjectkey.ID(keyA)) != 32 {
		t.Errorf("ids do not tell keys apart: %s %s %s", subjectkey.ID(keyA), subjectkey.ID(keyB), subjectkey.Unkeyed)
	}
}

// records returns a record constructor on a real Redis under a prefix of
// the test's own, and a reader of what the record holds ("" none).
func records(t *testing.T) (func(key []byte) *subjectkey.Record, func() string) {
	t.Helper()
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "subjectkey")
	testenv.DeleteKeys(t, rdb, prefix)
	return func(key []byte) *subjectkey.Record { return subjectkey.New(rdb, prefix, key, time.Second) },
		func() string {
			v, err := rdb.Get(context.Background(), subjectkey.Key(prefix)).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			return v
		}
}

// TestCheckNeverWrites is the first writer: a limiter without a
// key, run before any deployment, records nothing, so it cannot lock the
// keyed deployment out; it is refused once the deployment has written.
func TestCheckNeverWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, held := records(t)
	if err := rec(nil).Check(ctx); err != nil {
		t.Fatalf("Check before any record = %v, want nil", err)
	}
	if v := held(); v != "" {
		t.Fatalf("Check wrote %q, want no record", v)
	}
	if o, err := rec(keyA).Deploy(ctx); o != subjectkey.Recorded || err != nil {
		t.Fatalf("Deploy = %s, %v; want recorded", o, err)
	}
	err := rec(nil).Check(ctx)
	for _, w := range []string{"this process has no subject hash key", "SUBJECT_HMAC_KEY_SECRET_ARN", subjectkey.Recovery} {
		if !errors.Is(err, subjectkey.ErrMismatch) || !strings.Contains(err.Error(), w) {
			t.Errorf("unkeyed Check after the deployment = %v, want ErrMismatch saying %q", err, w)
		}
	}
	if err := rec(keyA).Check(ctx); err != nil {
		t.Errorf("Check with the deployment's key = %v", err)
	}
}

// TestDeploy: the deployment records its key where there is none, keeps
// it, replaces a record a process without a key wrote (before this
// package, the first process to call wrote), and leaves another key's for
// a rotation, with the command that does it.
func TestDeploy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, held := records(t)
	if o, err := rec(nil).Deploy(ctx); o != subjectkey.Recorded || err != nil || held() != subjectkey.Unkeyed {
		t.Fatalf("unkeyed Deploy = %s, %v, record %q; want recorded, unkeyed", o, err, held())
	}
	if o, err := rec(keyA).Deploy(ctx); o != subjectkey.Replaced || err != nil || held() != subjectkey.ID(keyA) {
		t.Fatalf("keyed Deploy over an unkeyed record = %s, %v, record %q; want replaced by key A's", o, err, held())
	}
	if o, err := rec(keyA).Deploy(ctx); o != subjectkey.Kept || err != nil {
		t.Fatalf("Deploy again = %s, %v; want kept", o, err)
	}
	for _, key := range [][]byte{keyB, nil} {
		_, err := rec(key).Deploy(ctx)
		var me *subjectkey.MismatchError
		if !errors.As(err, &me) || me.Recorded != subjectkey.ID(keyA) || me.Own != subjectkey.ID(key) {
			t.Fatalf("Deploy of key %q over key A's = %v, want a MismatchError", key, err)
		}
		if key != nil && !strings.Contains(err.Error(), subjectkey.RotateCommand(subjectkey.ID(keyA))) {
			t.Errorf("refusal %q does not name the rotation", err)
		}
		if held() != subjectkey.ID(keyA) {
			t.Errorf("record after a refused Deploy = %q, want key A's", held())
		}
	}
}

// TestRotate: a rotation is a compare-and-set from the id recorded: from
// a stale id it changes nothing and says what is recorded; of several at
// once from the same id, one wins.
func TestRotate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec, held := records(t)
	if _, err := rec(keyA).Deploy(ctx); err != nil {
		t.Fatal(err)
	}
	idA := subjectkey.ID(keyA)
	if err := rec(keyB).Rotate(ctx, subjectkey.Unkeyed); !errors.Is(err, subjectkey.ErrChanged) || !strings.Contains(err.Error(), idA) {
		t.Fatalf("Rotate from a stale id = %v, want ErrChanged naming %s", err, idA)
	}
	if held() != idA {
		t.Fatalf("record after a refused rotation = %q, want %s", held(), idA)
	}
	keys := [][]byte{keyB, []byte("subject-key-c-0123456789"), []byte("subject-key-d-0123456789"), []byte("subject-key-e-0123456789")}
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() { errs[i] = rec(k).Rotate(ctx, idA) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("two rotations from %s both won: %d and %d", idA, won, i)
		case err == nil:
			won = i
		case !errors.Is(err, subjectkey.ErrChanged):
			t.Errorf("rotation %d = %v, want nil or ErrChanged", i, err)
		}
	}
	if won < 0 || held() != subjectkey.ID(keys[won]) {
		t.Fatalf("after the race: winner %d, record %q", won, held())
	}
	if err := rec(keys[won]).Rotate(ctx, idA); err != nil {
		t.Errorf("the winner's rotation again = %v, want nil (already recorded)", err)
	}
	if err := rec(keyA).Check(ctx); !errors.Is(err, subjectkey.ErrMismatch) {
		t.Errorf("the old key after the rotation: Check = %v, want ErrMismatch", err)
	}
}
