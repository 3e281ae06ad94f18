package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/stats"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestFindSubject: POST /subjects/find answers the subject's keyed hash,
// the one the data path names it by (a limiter with the deployment's key:
// not the unkeyed hash), and where it is among the top denied subjects,
// without ever logging or answering the subject itself.
func TestFindSubject(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t, "find")
	lim := limiter.New(rdb, limiter.Options{Prefix: prefix, SubjectKey: []byte("deployment-key-0123456789abcdef"), Timeout: 2 * time.Second})
	const subject = "customer-42"
	hash := lim.SubjectHash(subject)
	if hash == limiter.SubjectHash(subject) {
		t.Fatal("the keyed and unkeyed hashes agree; the test would not tell them apart")
	}
	st := stats.New(stats.Options{})
	for range 5 {
		st.Record(stats.Decision{Rule: "r-noisy", API: "shop", SubjectHash: "ffff"})
	}
	for range 3 {
		st.Record(stats.Decision{Rule: "r1", API: "shop", SubjectHash: hash})
	}
	st.Record(stats.Decision{Rule: "r2", API: "shop", SubjectHash: hash})
	var logs testenv.Buffer
	h := pinnedHandler(admin.New(mustMemory(), nil, lim, admin.Options{Stats: st, Logger: newJSONLogger(&logs)}), admin.RouteFindSubject)
	find := func(body string) (int, string) {
		t.Helper()
		resp, err := h(context.Background(), event(admin.RouteFindSubject, nil, body))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Body
	}

	var got admin.FindSubjectResponse
	resp, _ := h(context.Background(), event(admin.RouteFindSubject, nil, `{"subject":" customer-42 "}`))
	want(t, resp, 200, &got)
	if got.Hash != hash || !got.Searched || !got.Found || got.Window != "5m" || len(got.Matches) != 2 ||
		got.Matches[0].Rank != 2 || got.Matches[0].Rule != "r1" || got.Matches[0].Denied != 3 ||
		got.Matches[1].Rank != 3 || got.Matches[1].Rule != "r2" {
		t.Errorf("find customer-42 = %+v; want hash %s found at ranks 2 (r1, 3 denials) and 3 (r2)", got, hash)
	}
	if strings.Contains(resp.Body, subject) {
		t.Errorf("answer %s repeats the subject", resp.Body)
	}
	// top narrows the lists looked in.
	resp, _ = h(context.Background(), event(admin.RouteFindSubject, nil, `{"subject":"customer-42","top":1,"window":"15m"}`))
	want(t, resp, 200, &got)
	if got.Found || len(got.Matches) != 0 || got.Hash != hash || got.Window != "15m" {
		t.Errorf("find in the top 1 = %+v; want its hash, not found", got)
	}
	resp, _ = h(context.Background(), event(admin.RouteFindSubject, nil, `{"subject":"customer-7"}`))
	want(t, resp, 200, &got)
	if got.Found || got.Matches == nil || got.Hash != lim.SubjectHash("customer-7") {
		t.Errorf("find customer-7 = %+v; want its hash, not found, matches []", got)
	}

	for _, bad := range []struct{ body, field string }{
		{`{}`, "subject"},
		{`{"subject":""}`, "subject"},
		{`{"subject":"` + strings.Repeat("k", 300) + `"}`, "subject"},
		{`{"subject":"customer-42","window":"2h"}`, "window"},
		{`{"subject":"customer-42","top":1000}`, "top"},
		{`{"subject":"customer-42","subjet":1}`, "subjet"},
	} {
		code, body := find(bad.body)
		if code != 400 || !strings.Contains(body, `"field":"`+bad.field+`"`) {
			t.Errorf("POST /subjects/find %s = %d %s, want a 400 on %s", bad.body, code, body, bad.field)
		}
	}
	if strings.Contains(logs.String(), subject) {
		t.Errorf("the log holds the raw subject:\n%s", logs.String())
	}

	// No statistics: the hash, and searched false.
	noStats := pinnedHandler(admin.New(mustMemory(), nil, lim, admin.Options{}), admin.RouteFindSubject)
	resp, _ = noStats(context.Background(), event(admin.RouteFindSubject, nil, `{"subject":"customer-42"}`))
	want(t, resp, 200, &got)
	if got.Hash != hash || got.Searched || got.Found {
		t.Errorf("find without statistics = %+v; want the hash, searched false", got)
	}
	// No limiter, no key: 503, not a wrong (unkeyed) hash.
	none := pinnedHandler(admin.New(mustMemory(), nil, nil, admin.Options{Stats: st}), admin.RouteFindSubject)
	r, _ := none(context.Background(), event(admin.RouteFindSubject, nil, `{"subject":"customer-42"}`))
	wantProblem(t, r, 503)
}
