package limiter

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCallCtx(t *testing.T) {
	// A parent deadline earlier than the timeout wins.
	parent, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	pd, _ := parent.Deadline()
	c := getCall()
	c.ctx.arm(parent, time.Second)
	if d, ok := c.ctx.Deadline(); !ok || !d.Equal(pd) {
		t.Errorf("Deadline() = %v, %v, want the parent's %v", d, ok, pd)
	}
	if err := c.ctx.Err(); err != nil {
		t.Errorf("Err() before the deadline = %v, want nil", err)
	}
	select {
	case <-c.ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("Done() not closed after the deadline")
	}
	if err := c.ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() after the deadline = %v, want DeadlineExceeded", err)
	}
	if c.ctx.disarm() {
		t.Errorf("disarm() after the timer fired = true, want false (not reusable)")
	}

	// A call that ends in time leaves a reusable context.
	c = &call{}
	c.ctx.arm(context.Background(), time.Second)
	if d, _ := c.ctx.Deadline(); time.Until(d) < 900*time.Millisecond {
		t.Errorf("Deadline() = %v from now, want about 1s", time.Until(d))
	}
	if !c.ctx.disarm() {
		t.Errorf("disarm() before the deadline = false, want true")
	}
	c.ctx.arm(context.Background(), 5*time.Millisecond)
	<-c.ctx.Done()
	if err := c.ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Err() after a re-armed deadline = %v, want DeadlineExceeded", err)
	}

	// The parent's values and cancellation show through.
	type key struct{}
	vp, cancelV := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	c = &call{}
	c.ctx.arm(vp, time.Second)
	if got := c.ctx.Value(key{}); got != "v" {
		t.Errorf("Value() = %v, want the parent's", got)
	}
	cancelV()
	if err := c.ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err() after the parent's cancel = %v, want Canceled", err)
	}
	c.ctx.disarm()
}

func TestBuild(t *testing.T) {
	c := getCall()
	defer putCall(c)
	bs := []Bucket{
		{ID: "a", Limit: 10, Period: time.Minute},
		{ID: "route-7", Limit: 3, Period: 1500 * time.Microsecond, Burst: 9, Shadow: true},
	}
	c.build("p:", &subjects{id: digestOf("subject")}, 2, bs)
	h := SubjectHash("subject")
	if got, want := strings.Join(c.keys, ","), "p:{"+h+"}:a,p:{"+h+"}:route-7"; got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	var args []string
	for _, a := range c.args {
		b, _ := a.(*argBytes).MarshalBinary()
		args = append(args, string(b))
	}
	if got, want := strings.Join(args, " "), "2 10 60000000 10 0 3 1500 9 1"; got != want {
		t.Errorf("args = %s, want %s", got, want)
	}
}

func FuzzParseReply(f *testing.F) {
	f.Add("1 1 9 360000 0 0", 1)
	f.Add("0 2 0 3600000 1800000 1 8 720000 0 3600000", 2)
	f.Add("1 0 0 0 0 0", 1)
	f.Add("", 1)
	f.Add("1 1 x 0 0 0", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 1 || n > MaxBuckets {
			return
		}
		rd := replyReader{s: s}
		r, err := parseReply(&rd, n)
		if err != nil {
			return
		}
		if r.index < 0 || r.index >= n {
			t.Errorf("parseReply(%q, %d) = index %d, want 0..%d", s, n, r.index, n-1)
		}
		// A reply that parses is six integers.
		f := strings.Fields(s)
		if len(f) < 6 {
			t.Errorf("parseReply(%q) parsed fewer than 6 fields", s)
		}
		if v, _ := strconv.ParseInt(f[2], 10, 64); v != r.remaining {
			t.Errorf("parseReply(%q).remaining = %d, want %d", s, r.remaining, v)
		}
	})
}

// TestHasherIsHMAC checks the hand-rolled HMAC against crypto/hmac, for
// keys shorter than, equal to and longer than SHA-256's block, and that a
// key changes every hash (a mutation that dropped the key fails here).
func TestHasherIsHMAC(t *testing.T) {
	long := strings.Repeat("s", 1000)
	for _, key := range [][]byte{nil, []byte("k"), bytes.Repeat([]byte{7}, 64), bytes.Repeat([]byte{9}, 100)} {
		for _, subject := range []string{"", "alice", long} {
			m := hmac.New(sha256.New, key)
			m.Write([]byte(subject))
			want := hex.EncodeToString(m.Sum(nil)[:16])
			if got := NewHasher(key).SubjectHash(subject); got != want {
				t.Errorf("NewHasher(%d-byte key).SubjectHash(%d bytes) = %s, want HMAC %s", len(key), len(subject), got, want)
			}
		}
	}
	if NewHasher([]byte("a")).SubjectHash("10.0.0.1") == SubjectHash("10.0.0.1") {
		t.Error("a keyed hash equals the unkeyed one")
	}
	h := NewHasher([]byte("k"))
	if n := testing.AllocsPerRun(100, func() { h.digest(long) }); n != 0 {
		t.Errorf("digest(1 KB subject) allocates %v times, want 0", n)
	}
}
