package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	"github.com/sluicehq/sluice/internal/edge"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/identity"
	"github.com/sluicehq/sluice/internal/limiter"
)

// ProblemTypeBase prefixes the type URI of the problem documents the
// middleware and the integration wrappers answer with (429, 401, 500); the
// fragment names the section of docs/middleware.md that explains it.
const ProblemTypeBase = httpapi.DocsBase + "middleware.md#"

// HandlerOptions configure the net/http middleware (Handler) and the Lambda
// integration wrappers (LimitHTTPAPI, LimitProxy, LimitALB).
type HandlerOptions struct {
	// API is the api the rules name for these requests, such as "orders".
	// The net/http middleware and LimitALB need it (a rule of api "*"
	// matches any); for LimitHTTPAPI and LimitProxy "" is the event's API
	// Gateway api id, as Sluice's authorizer reads it.
	API string
	// Resource names the route of a request that has none of its own, as
	// the rules name it ("/orders/{id}"), from its method and path: a
	// net/http request no ServeMux pattern matched (see Handler), and
	// every ALB event. nil, or "", leaves such a request to the rules of
	// route "*" and the default limit.
	Resource func(method, path string) string
	// Subject, when set, names the caller of a net/http request instead of
	// the Limiter's subject sources (Options.Sources), after the caller's
	// own authentication, say. The value passes the one subject hygiene
	// (white space trimmed; at most MaxSubjectLen bytes of UTF-8 without
	// control characters); "" or a refused one is answered with 401.
	Subject func(r *http.Request) string
	// SourceIP returns the address the ip source reads of a net/http
	// request, when set; it wins over ForwardedHops.
	SourceIP func(r *http.Request) string
	// ForwardedHops is how many proxies in front of the handler append
	// the address they saw to X-Forwarded-For and are trusted to: the
	// ip source reads the ForwardedHops-th address from the right of that
	// header. 0 does not read the header, whose addresses the client may
	// have written: the address is then the transport's (r.RemoteAddr,
	// API Gateway's sourceIp), and an ALB event has none. An ALB in its
	// default append mode is 1, CloudFront in front of it 2; the table
	// for each host is in docs/middleware.md.
	ForwardedHops int
	// AllowHeaders sends the RateLimit fields of the Limiter's dialects
	// (Options.Headers) on allowed requests too; a denied one always
	// carries them. Off by default: an allowed request then costs no
	// header formatting.
	AllowHeaders bool
	// Observer, when set, is told of every decision: the hook for
	// Prometheus (package ratelimit/prommetrics) or any other metrics.
	Observer Observer
}

// Handler returns next behind Sluice's limits: each request is decided on
// before next sees it, with the decision of Sluice's authorizer (subject
// sources and hygiene, rules, limiter, failure modes, shadow rules). A
// denied request is answered with 429, Retry-After, the RateLimit fields
// and a problem+json body, and next is not called; a request without a
// usable subject with 401 and a problem+json body; an allowed one reaches
// next, with the RateLimit fields when o.AllowHeaders is set.
//
// The rules see the request as api o.API, its method, and as route the
// resource template of the ServeMux pattern that routes it: when next is a
// *http.ServeMux, the pattern it will route r to (even when another mux
// routed r to Handler), else r.Pattern when Handler wraps a handler the
// mux calls ("GET /orders/{id}" gives "/orders/{id}"; a {name...}
// wildcard is API Gateway's {name+}), else o.Resource. Redis failing,
// each rule's failure mode decides, and a closed one denies with 429, as
// the authorizer does.
func (l *Limiter) Handler(next http.Handler, o HandlerOptions) http.Handler {
	mux, _ := next.(*http.ServeMux)
	core := l.decider(&o)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := l.netRequest(r, mux, &o)
		status, body, slots := l.judge(r.Context(), core, &req, w.Header(), &o)
		if status == 0 {
			// The request's in-flight slots are freed when next returns,
			// panicking or not, and when the client went away (release
			// ignores the request's cancellation).
			defer core.Release(r.Context(), slots)
			next.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write(body) //nolint:errcheck // the client has gone
	})
}

// decider is the core the handlers of o decide with: l's, telling
// o.Observer of every decision when it is set.
func (l *Limiter) decider(o *HandlerOptions) *authorizer.Authorizer {
	if o.Observer == nil {
		return l.core
	}
	return l.core.WithObserver(CoreObserver(o.Observer))
}

// netRequest is what the decision reads of a net/http request
// (edge.HTTP), with the api and the route of o and the mux.
func (l *Limiter) netRequest(r *http.Request, mux *http.ServeMux, o *HandlerOptions) authorizer.Request {
	req := edge.HTTP(r, l.headers, o.ForwardedHops)
	req.API = o.API
	// The mux Handler wraps routes r, and knows its route better than a
	// mux that routed r here: mounted under another mux, r.Pattern is the
	// outer one's ("/api/"), the same for every route.
	pattern := r.Pattern
	if mux != nil {
		_, pattern = mux.Handler(r)
	}
	if pattern != "" {
		req.Resource = patternResource(pattern)
	} else if o.Resource != nil {
		req.Resource = o.Resource(r.Method, r.URL.Path)
	}
	if o.SourceIP != nil {
		req.SourceIP = o.SourceIP(r)
	}
	if o.Subject != nil {
		req.Subject = o.Subject(r)
		if req.Subject == "" {
			// Decide would read the sources: a caller's "" is no subject.
			req.Subject = noSubject
		}
	}
	return req
}

// noSubject stands for the empty subject a Subject func returned: blank,
// so the subject hygiene refuses it as it refuses "".
const noSubject = " "

// patternResource is the resource template of a ServeMux pattern as API
// Gateway writes one: "[METHOD ][HOST]/PATH" gives /PATH, a trailing
// {$} is dropped and {name...} is {name+}.
func patternResource(p string) string {
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	if i := strings.IndexByte(p, '/'); i > 0 {
		p = p[i:] // the host
	}
	p = strings.TrimSuffix(p, "{$}")
	if strings.HasSuffix(p, "...}") {
		p = strings.TrimSuffix(p, "...}") + "+}"
	}
	return p
}

// judge decides on req for the middleware and the integration wrappers,
// and says how to answer: status 0 lets the request through, with the
// RateLimit fields in hdr when o.AllowHeaders is set, holding slots (its
// in-flight slots, for core.Release when the work ends); else hdr holds
// the answer's fields and body its problem document (429 denied, 401 no
// usable subject, 500 a subject hash key other than the deployment's).
func (l *Limiter) judge(ctx context.Context, core *authorizer.Authorizer, req *authorizer.Request, hdr http.Header, o *HandlerOptions) (status int, body []byte, slots limiter.Slots) {
	if err := l.checkKey(ctx); err != nil {
		status, body = render(hdr, httpapi.Internal(err))
		return status, body, slots
	}
	res, err := core.Decide(ctx, req)
	switch {
	case errors.Is(err, authorizer.ErrNoSubject):
		e := &httpapi.Error{Status: http.StatusUnauthorized, Err: err,
			Detail: "The request names no caller Sluice can limit: send " + identity.FormatSources(l.sources) + ", one value of at most " + strconv.Itoa(MaxSubjectLen) + " bytes."}
		if identity.HasKind(l.sources, identity.SourceJWT) {
			e.Header = http.Header{"Www-Authenticate": {"Bearer"}}
		}
		if req.Subject != "" {
			e.Detail = "The request names no caller Sluice can limit."
		}
		status, body = render(hdr, e)
		return status, body, slots
	case res.Allowed:
		if o.AllowHeaders {
			edge.SetFields(hdr, &res, l.dialect, time.Now())
		}
		return 0, nil, res.Slots
	}
	edge.SetFields(hdr, &res, l.dialect, time.Now())
	hdr.Set("Content-Type", "application/problem+json")
	hdr.Set("Cache-Control", "no-store")
	secs := authorizer.Seconds(res.RetryAfter)
	b, _ := json.Marshal(httpapi.Problem{Type: ProblemTypeBase + "too-many-requests", Title: http.StatusText(http.StatusTooManyRequests),
		Status: http.StatusTooManyRequests, Detail: fmt.Sprintf("Rate limit exceeded: retry in %d s.", secs)})
	return http.StatusTooManyRequests, append(b, '\n'), slots
}

// render writes e's problem document's fields into hdr and returns its
// status and body.
func render(hdr http.Header, e *httpapi.Error) (int, []byte) {
	status, h, body := httpapi.Render(ProblemTypeBase, e)
	maps.Copy(hdr, h)
	return status, body
}
