package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sluicehq/sluice/internal/rules"
)

// The CDN edge's checks (docs/edge.md), when the stack outputs EdgeDomain
// (-c edge=cloudfront) or with --local --edge: what only a deploy proves.
const (
	edgeDirectCheck = "demo API refuses a request not through the edge"
	edgeDenyCheck   = "edge denies a blocked subject"
	edgeFreeCheck   = "edge frees an unblocked subject"
)

// edgeGenerated is the X-Cache value CloudFront gives a response its
// function generated (and sluice local's edge copies).
const edgeGenerated = "FunctionGeneratedResponse from cloudfront"

// edgeChecks blocks a subject of its own for ten minutes (limit 0, an
// expiring rule), asks the demo API through the edge until the edge
// answers its 429 itself, within --edge-within (the publisher's round,
// then the store's propagation to the edge location), then deletes the
// block and asks until the edge lets the subject through again: the
// tier's one false-deny bound, measured. On AWS it first asks the API's
// own URL, without the distribution's header: API Gateway must answer
// 401 (the authorizer's identity source).
func (v *verifier) edgeChecks(ctx context.Context, subject string) {
	if v.t.direct != "" {
		resp, err := v.get(ctx, v.t.direct+"/hello", subject)
		if err == nil && resp.StatusCode != http.StatusUnauthorized {
			err = fmt.Errorf("GET %s/hello without X-Origin-Verify = %d, want 401: the API can be called around the edge", v.t.direct, resp.StatusCode)
		}
		v.add(edgeDirectCheck, err, "GET /hello on the API's own URL: %d", status(resp))
	}
	block := rules.Rule{
		API: v.t.api, Route: "*", Subject: subject, Limit: new(int64(0)), Period: rules.Period(time.Minute),
		ExpiresAt: new(time.Now().Add(10 * time.Minute).UTC().Truncate(time.Second)), Description: "sluice verify: the edge's block, removed when it finishes",
	}
	created, err := v.write(ctx, block)
	if err != nil {
		v.add(edgeDenyCheck, err, "")
		v.notRun(edgeFreeCheck)
		return
	}
	blocked := time.Now()
	// The authorizer's first 429 records the denial; the publisher takes
	// it to the store.
	resp, ok, err := v.pollEdge(ctx, subject, true)
	took := time.Since(blocked).Round(time.Second)
	if err == nil && !ok {
		err = fmt.Errorf("no 429 from the edge within %v of the block (last answer %d, X-Cache %q)", v.cmd.EdgeWithin, status(resp), header(resp, "X-Cache"))
	}
	if err == nil && (resp.Header.Get("Retry-After") == "" || resp.Header.Get("RateLimit-Policy") == "") {
		err = fmt.Errorf("the edge's 429 lacks Retry-After or RateLimit-Policy (headers %v)", resp.Header)
	}
	v.add(edgeDenyCheck, err, "429 from the edge %v after the block, Retry-After: %s", took, header(resp, "Retry-After"))
	if err != nil {
		v.notRun(edgeFreeCheck)
		return
	}
	if err := v.c.SendJSON(ctx, http.MethodDelete, "/rules/"+url.PathEscape(created.ID), nil, created.Version, nil); err != nil {
		v.add(edgeFreeCheck, err, "")
		return
	}
	v.written = v.written[:len(v.written)-1]
	unblocked := time.Now()
	resp, ok, err = v.pollEdge(ctx, subject, false)
	if err == nil && !ok {
		err = fmt.Errorf("the edge still denies %v after the block's delete (last answer %d)", v.cmd.EdgeWithin, status(resp))
	}
	v.add(edgeFreeCheck, err, "%d %v after the delete (the false-deny bound)", status(resp), time.Since(unblocked).Round(time.Second))
}

// pollEdge asks the demo API as subject every 2 s (under the demo API's
// throttle) until the edge answers (deny) or does not (!deny), or
// --edge-within passes: ok says which.
func (v *verifier) pollEdge(ctx context.Context, subject string, deny bool) (*http.Response, bool, error) {
	var resp *http.Response
	var ok bool
	err := poll(ctx, time.Now().Add(v.cmd.EdgeWithin), v.cmd.edgePoll(), func() (bool, error) {
		var err error
		if resp, err = v.get(ctx, v.t.demo+"/hello", subject); err != nil {
			return false, err
		}
		fromEdge := resp.Header.Get("X-Cache") == edgeGenerated
		ok = fromEdge == deny
		return ok, nil
	})
	return resp, ok, err
}

// edgePoll is how often pollEdge asks: every 2 s, or a tenth of
// --edge-within when that is shorter (sluice local's second).
func (cmd *verifyCmd) edgePoll() time.Duration {
	return min(2*time.Second, cmd.EdgeWithin/10)
}
