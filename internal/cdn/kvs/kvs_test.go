package kvs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/cdn"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/testenv"
)

const (
	account  = "123456789012"
	storeARN = "arn:aws:cloudfront::" + account + ":key-value-store/0f3e4a5b-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
)

// service is the KeyValueStore's data plane as the API reference
// describes it, at the HTTP level: the SDK's requests are checked for the
// shape the service takes (host, path, SigV4A, If-Match) and answered
// with its status codes and error types.
type service struct {
	t     *testing.T
	mu    sync.Mutex
	etag  int
	items map[string]string
	// fail, when set, answers the next UpdateKeys with this status and
	// error type.
	failStatus int
	failType   string
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(r); err != nil {
		s.t.Errorf("%s %s: %v", r.Method, r.URL.EscapedPath(), err)
		s.fail(w, http.StatusBadRequest, "ValidationException", err.Error())
		return
	}
	base := "/key-value-stores/" + url.QueryEscape(storeARN) // the SDK escapes : and /
	switch {
	case r.Method == http.MethodGet && r.URL.EscapedPath() == base:
		w.Header().Set("ETag", s.tag())
		_ = json.NewEncoder(w).Encode(map[string]any{"KvsARN": storeARN, "ItemCount": len(s.items), "TotalSizeInBytes": s.size(), "Created": 1.7e9})
	case r.Method == http.MethodPost && r.URL.EscapedPath() == base+"/keys":
		if s.failStatus != 0 {
			st, ty := s.failStatus, s.failType
			s.failStatus = 0
			s.fail(w, st, ty, "injected")
			return
		}
		if r.Header.Get("If-Match") != s.tag() {
			s.fail(w, http.StatusConflict, "ConflictException", "Pre-condition failed: ETag mismatch")
			return
		}
		var in struct {
			Puts    []struct{ Key, Value string }
			Deletes []struct{ Key string }
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			s.fail(w, http.StatusBadRequest, "ValidationException", err.Error())
			return
		}
		if n := len(in.Puts) + len(in.Deletes); n == 0 || n > 50 {
			s.fail(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("%d keys", n))
			return
		}
		for _, p := range in.Puts {
			s.items[p.Key] = p.Value
		}
		for _, d := range in.Deletes {
			delete(s.items, d.Key)
		}
		s.etag++
		w.Header().Set("ETag", s.tag())
		_ = json.NewEncoder(w).Encode(map[string]any{"ItemCount": len(s.items), "TotalSizeInBytes": s.size()})
	default:
		s.t.Errorf("unexpected %s %s", r.Method, r.URL.EscapedPath())
		s.fail(w, http.StatusNotFound, "ResourceNotFoundException", "no such route")
	}
}

// check holds a request to the shape the service takes: the account's
// host, a SigV4A signature for cloudfront-keyvaluestore over every
// Region, If-Match signed on a write.
func (s *service) check(r *http.Request) error {
	if h, _, _ := strings.Cut(r.Host, "."); h != account {
		return fmt.Errorf("host %q: want the account's, %s.cloudfront-kvs.global.api.aws", r.Host, account)
	}
	auth := r.Header.Get("Authorization")
	alg, rest, _ := strings.Cut(auth, " ")
	if alg != "AWS4-ECDSA-P256-SHA256" {
		return fmt.Errorf("signed with %q, want SigV4A (AWS4-ECDSA-P256-SHA256)", alg)
	}
	if !strings.Contains(rest, "Credential=AKID/") || !strings.Contains(rest, "/cloudfront-keyvaluestore/aws4_request") {
		return fmt.Errorf("credential scope in %q", rest)
	}
	if rs := r.Header.Get("X-Amz-Region-Set"); rs != "*" {
		return fmt.Errorf("X-Amz-Region-Set = %q, want *", rs)
	}
	_, signed, _ := strings.Cut(rest, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	want := []string{"host", "x-amz-date", "x-amz-region-set"}
	if r.Method == http.MethodPost {
		want = append(want, "if-match", "content-type")
	}
	for _, h := range want {
		if !strings.Contains(";"+signed+";", ";"+h+";") {
			return fmt.Errorf("%s not signed (SignedHeaders=%s)", h, signed)
		}
	}
	return nil
}

func (s *service) tag() string { return "ETAG" + strconv.Itoa(s.etag) }

func (s *service) size() int {
	n := 0
	for k, v := range s.items {
		n += len(k) + len(v)
	}
	return n
}

func (s *service) fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (s *service) get(k string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.items[k]
	return v, ok
}

// newStore starts a service and returns a Store pointed at it through
// BaseEndpoint; every connection, whatever the host, reaches it.
func newStore(t *testing.T) (*Store, *service) {
	t.Helper()
	svc := &service{t: t, items: map[string]string{}}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	cfg := aws.Config{
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}},
	}
	st, err := New(cfg, storeARN, Options{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return st, svc
}

// TestPublisherThroughSDK runs the real Publisher against the SDK client:
// a long denial recorded in Redis is put, a second writer's ETag move is
// a conflict the Publisher recovers from, and a reset deletes the key.
func TestPublisherThroughSDK(t *testing.T) {
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "kvs")
	ctx := context.Background()
	st, svc := newStore(t)

	eff := &rules.Effective{ID: "q", API: "api", Route: rules.Wildcard, Subject: rules.Wildcard, Limit: 10, Burst: 10, Cost: 1,
		Period: 24 * time.Hour, Kind: rules.Quota, PolicyName: `"q"`, Policy: `"q";q=10;w=86400`}
	rec, err := cdn.NewRecorder(rdb, cdn.RecorderOptions{EdgeKey: "edge", Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	rec.Denied("api", &authorizer.Result{Effective: eff, Rule: "q", Subject: "alice", DimensionSubject: "alice",
		DimensionSource: identity.SourceHeader, Dimension: identity.DefaultDimension, Limit: 10, RetryAfter: time.Hour, Reset: time.Hour, Cost: 1})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	pub := cdn.NewPublisher(rdb, st, cdn.PublisherOptions{Prefix: prefix})
	if r, err := pub.Publish(ctx); err != nil || r.Put != 1 {
		t.Fatalf("Publish = %+v, %v; want one put", r, err)
	}
	v, ok := svc.get(cdn.Key("edge", "alice"))
	if e, err := cdn.DecodeEntry(v); !ok || err != nil || e.Rule != "q" || e.API != "api" {
		t.Fatalf("the service holds %q (%v), want alice's entry", v, ok)
	}

	// Another writer moves the ETag: UpdateKeys answers 409, the
	// Publisher reads the ETag again and succeeds.
	svc.mu.Lock()
	svc.etag += 7
	svc.mu.Unlock()
	if err := rec.Forget(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if r, err := pub.Publish(ctx); err != nil || r.Deleted != 1 {
		t.Fatalf("Publish after a conflict = %+v, %v; want one delete", r, err)
	}
	if _, ok := svc.get(cdn.Key("edge", "alice")); ok {
		t.Error("alice's entry outlived her reset")
	}
}

// TestUpdateErrors: the service's errors as the Publisher sees them.
func TestUpdateErrors(t *testing.T) {
	ctx := context.Background()
	st, svc := newStore(t)
	etag, err := st.ETag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, "stale", map[string]string{"k": "v"}, nil); !errors.Is(err, cdn.ErrConflict) {
		t.Errorf("Update(stale ETag) = %v, want ErrConflict", err)
	}
	svc.mu.Lock()
	svc.failStatus, svc.failType = http.StatusForbidden, "AccessDeniedException"
	svc.mu.Unlock()
	if _, err := st.Update(ctx, etag, map[string]string{"k": "v"}, nil); err == nil || errors.Is(err, cdn.ErrConflict) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("Update(denied) = %v, want an access error that is no conflict", err)
	}
	many := map[string]string{}
	for i := range cdn.MaxBatch + 1 {
		many[strconv.Itoa(i)] = "v"
	}
	if _, err := st.Update(ctx, etag, many, nil); err == nil {
		t.Errorf("Update(%d keys) = nil, want refused before a call", len(many))
	}
	got, err := st.Update(ctx, etag, map[string]string{"k": "v"}, []string{"gone"})
	if err != nil || got == etag {
		t.Errorf("Update = %q, %v; want a new ETag", got, err)
	}
}

func TestNewRefusesOtherARNs(t *testing.T) {
	for _, a := range []string{"", "store", "arn:aws:s3:::bucket", "arn:aws:cloudfront::1:distribution/E1", "arn:aws:cloudfront::1:key-value-store/"} {
		if _, err := New(aws.Config{}, a, Options{}); err == nil {
			t.Errorf("New(%q) = nil error", a)
		}
	}
}
