package limiter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestClaimSubjectKey: the first Limiter under a prefix records its key's
// id; a Limiter with the same key agrees, one with another key or none is
// refused with ErrSubjectKeyMismatch saying which side lacks a key; the
// record holds an id, never the key.
func TestClaimSubjectKey(t *testing.T) {
	t.Parallel()
	c := newClient(t, 4)
	ctx := context.Background()
	keyA, keyB := []byte("subject-key-a-0123456789"), []byte("subject-key-b-0123456789")
	at := func(prefix string, key []byte) *Limiter {
		return New(c, Options{Prefix: prefix, Timeout: time.Second, SubjectKey: key})
	}

	keyed := testPrefix(t, c)
	if err := at(keyed, keyA).ClaimSubjectKey(ctx); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	recorded, err := c.Get(ctx, SubjectKeyRecord(keyed)).Result()
	if err != nil || recorded != at(keyed, keyA).KeyID() || len(recorded) != 32 || strings.Contains(recorded, string(keyA)) {
		t.Fatalf("record = %q, %v; want key A's 32-hex id %q", recorded, err, at(keyed, keyA).KeyID())
	}
	unkeyedPrefix := testPrefix(t, c)
	if err := at(unkeyedPrefix, nil).ClaimSubjectKey(ctx); err != nil {
		t.Fatalf("first unkeyed claim: %v", err)
	}
	for _, tt := range []struct {
		name   string
		prefix string
		key    []byte
		want   string // "" for agreement
	}{
		{"same key", keyed, keyA, ""},
		{"same key again", keyed, keyA, ""},
		{"another key", keyed, keyB, "records key id"},
		{"no key next to a keyed record", keyed, nil, "this process has no subject hash key"},
		{"a key next to an unkeyed record", unkeyedPrefix, keyA, "named without a key"},
		{"no key next to an unkeyed record", unkeyedPrefix, nil, ""},
	} {
		err := at(tt.prefix, tt.key).ClaimSubjectKey(ctx)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: ClaimSubjectKey = %v, want nil", tt.name, err)
		case tt.want != "" && (!errors.Is(err, ErrSubjectKeyMismatch) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: ClaimSubjectKey = %v, want ErrSubjectKeyMismatch saying %q", tt.name, err, tt.want)
		}
	}
	if got, _ := c.Get(ctx, SubjectKeyRecord(keyed)).Result(); got != recorded {
		t.Errorf("record after the refused claims = %q, want %q unchanged", got, recorded)
	}
	if at(keyed, keyA).KeyID() == at(keyed, nil).KeyID() || at(keyed, keyA).KeyID() == at(keyed, keyA).SubjectHash(keyIDInput[1:]) {
		t.Errorf("key ids do not tell keys apart, or equal a subject's hash")
	}
}
