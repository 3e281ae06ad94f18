package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/local"
	"github.com/sluicehq/sluice/internal/testenv"
)

// decisions is the demo APIs' decision count on /metrics.
func (p *localProc) decisions(t *testing.T) float64 {
	t.Helper()
	_, body := p.get(t, "/metrics", "")
	var n float64
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "sluice_decisions_total") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("/metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

// fromEdge reports whether the local edge answered resp itself, as
// CloudFront marks a response its function generated.
func fromEdge(resp *http.Response) bool {
	return resp.Header.Get("X-Cache") == "FunctionGeneratedResponse from cloudfront"
}

// TestLocalEdge runs `sluice local --edge` as a newcomer would: a subject
// blocked for 2 minutes is denied by the edge once published, with the
// authorizer's 429 and no decision made; a short denial never reaches
// the edge; deleting the block frees the subject within the local bound.
func TestLocalEdge(t *testing.T) {
	p := startLocal(t, nil, "--edge")
	if !strings.Contains(p.out.String(), "  edge       http://") {
		t.Fatalf("the banner names no edge:\n%s", p.out)
	}

	// A short denial: bob over the demo API's 10 requests a minute.
	var last *http.Response
	for range 11 {
		last, _ = p.get(t, "/hello", "bob")
	}
	if last.StatusCode != http.StatusTooManyRequests || fromEdge(last) {
		t.Fatalf("bob's 11th request = %d (edge %v), want the authorizer's 429", last.StatusCode, fromEdge(last))
	}

	exp := time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)
	code, body := p.adminDo(t, http.MethodPost, "/rules",
		`{"api":"demo","route":"*","subject":"mallory","limit":0,"period":"1m","expires_at":"`+exp+`"}`, 0)
	if code != http.StatusCreated {
		t.Fatalf("POST /rules = %d %s", code, body)
	}
	var block struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	}
	if err := json.Unmarshal(body, &block); err != nil {
		t.Fatal(err)
	}
	auth, authBody := p.get(t, "/hello", "mallory")
	if auth.StatusCode != http.StatusTooManyRequests || fromEdge(auth) {
		t.Fatalf("mallory's first request = %d (edge %v), want the authorizer's 429", auth.StatusCode, fromEdge(auth))
	}
	published := time.Now()
	var edge *http.Response
	var edgeBody []byte
	testenv.Await(t, 10*time.Second, 50*time.Millisecond, "the edge denies mallory", func() bool {
		edge, edgeBody = p.get(t, "/hello", "mallory")
		return fromEdge(edge)
	})
	t.Logf("denial to the edge: %v (publish every %v)", time.Since(published).Round(time.Millisecond), local.EdgeInterval)

	// The same 429: status, header names, body fields; Retry-After within
	// the seconds between the two answers.
	if edge.StatusCode != http.StatusTooManyRequests {
		t.Errorf("edge status = %d, want 429", edge.StatusCode)
	}
	names := func(h http.Header) []string {
		h = h.Clone()
		for _, k := range []string{"Date", "Content-Length", "X-Cache", "X-Amzn-Requestid", "X-Amzn-Errortype"} {
			h.Del(k)
		}
		return slices.Sorted(maps.Keys(h))
	}
	if a, e := names(auth.Header), names(edge.Header); !slices.Equal(a, e) {
		t.Errorf("headers: authorizer %v, edge %v", a, e)
	}
	ra, _ := strconv.Atoi(auth.Header.Get("Retry-After"))
	re, _ := strconv.Atoi(edge.Header.Get("Retry-After"))
	if ra < 60 || re > ra || re < ra-15 {
		t.Errorf("Retry-After: authorizer %d, edge %d; want the edge's within the seconds since", ra, re)
	}
	var ab, eb map[string]any
	if json.Unmarshal(authBody, &ab) != nil || json.Unmarshal(edgeBody, &eb) != nil {
		t.Fatalf("bodies: authorizer %s, edge %s", authBody, edgeBody)
	}
	if a, e := slices.Sorted(maps.Keys(ab)), slices.Sorted(maps.Keys(eb)); !slices.Equal(a, e) {
		t.Errorf("body fields: authorizer %v, edge %v", a, e)
	}

	// At the edge, no decision is made.
	before := p.decisions(t)
	for range 5 {
		if r, _ := p.get(t, "/hello", "mallory"); !fromEdge(r) || r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("mallory = %d (edge %v), want the edge's 429", r.StatusCode, fromEdge(r))
		}
	}
	if after := p.decisions(t); after != before {
		t.Errorf("decisions went from %v to %v while the edge denied", before, after)
	}
	// bob's short denial was recorded before mallory's and published
	// rounds ago: it is not at the edge.
	if r, _ := p.get(t, "/hello", "bob"); r.StatusCode != http.StatusTooManyRequests || fromEdge(r) {
		t.Errorf("bob = %d (edge %v), want the authorizer's 429", r.StatusCode, fromEdge(r))
	}

	// Unblock: the rule's entries go with the next round.
	if code, body := p.adminDo(t, http.MethodDelete, "/rules/"+block.ID, "", block.Version); code != http.StatusNoContent {
		t.Fatalf("DELETE /rules/%s = %d %s", block.ID, code, body)
	}
	start := time.Now()
	testenv.Await(t, 10*time.Second, 20*time.Millisecond, "the edge frees mallory", func() bool {
		r, _ := p.get(t, "/hello", "mallory")
		return r.StatusCode == http.StatusOK
	})
	took := time.Since(start)
	t.Logf("unblock to the edge's release: %v (local bound %v)", took.Round(time.Millisecond), 2*local.EdgeInterval)
	if took > 2*local.EdgeInterval {
		t.Errorf("the edge freed mallory after %v, over the local bound %v", took, 2*local.EdgeInterval)
	}
}

// TestLocalOriginVerify: with ORIGIN_VERIFY, the demo API's authorizer
// refuses a request without the value (401), and --edge sends it as the
// distribution does, replacing a client's.
func TestLocalOriginVerify(t *testing.T) {
	env := []string{"ORIGIN_VERIFY=local-origin-value-0123"}
	direct := startLocal(t, env)
	if resp, body := direct.get(t, "/hello", "bob"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the edge: GET /hello = %d %s, want 401", resp.StatusCode, body)
	}
	edged := startLocal(t, env, "--edge")
	req, err := http.NewRequest(http.MethodGet, edged.base+"/hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", "bob")
	req.Header.Set("X-Origin-Verify", "a-client-guess-0123456")
	if resp, body := do(t, req); resp.StatusCode != http.StatusOK {
		t.Errorf("through the edge, a client's own X-Origin-Verify: GET /hello = %d %s, want 200", resp.StatusCode, body)
	}
}
