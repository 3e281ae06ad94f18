package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// HandlerOptions configure Service.Handler. The zero value serves every
// route.
type HandlerOptions struct {
	// Routes are the Route constants served; any other request gets 404
	// (or 405 when another method of a served resource). A Lambda function
	// behind one route names only its own, so that a misrouted event
	// cannot run another operation. Empty: every route. A name that is no
	// route is a deployment bug: every request gets 500, logged.
	Routes []string
	// Actor names who makes a request, for the audit log (the IAM caller
	// behind API Gateway, "local:..." in sluice local); nil or "" records
	// "unknown".
	Actor func(*http.Request) string
	// RequestID identifies a request in the logs; default its X-Request-Id
	// header.
	RequestID func(*http.Request) string
}

// Handler returns the admin API as an http.Handler: a net/http.ServeMux
// with one pattern per route ("GET /rules/{id}"), mounted at the root (or
// under a prefix with http.StripPrefix). The admin Lambdas run it through
// internal/lambdahttp, and sluice local mounts it, so both take one path.
//
// Unknown paths get 404 and a known path with another method 405 with an
// Allow header, both problem+json like every error; a trailing slash is
// ignored. The handler never fails: every error becomes a problem response,
// and server failures are logged.
func (s *Service) Handler(o HandlerOptions) http.Handler {
	a := &api{s: s, mux: http.NewServeMux(), actor: o.Actor, requestID: o.RequestID}
	if a.requestID == nil {
		a.requestID = func(r *http.Request) string { return r.Header.Get("X-Request-Id") }
	}
	for _, name := range o.Routes {
		if !slices.ContainsFunc(routes, func(rt *route) bool { return rt.name == name }) {
			a.unknown = append(a.unknown, name)
		}
	}
	// Each resource's methods: a request for it with another method gets
	// 405 and these in Allow, from a method-less pattern that the
	// method's own patterns outrank.
	allow := map[string][]string{}
	for _, rt := range routes {
		if len(o.Routes) > 0 && !slices.Contains(o.Routes, rt.name) {
			continue
		}
		a.mux.Handle(rt.name, a.endpoint(rt))
		allow[rt.resource] = append(allow[rt.resource], rt.method)
	}
	a.allow = allow
	for resource, methods := range allow {
		slices.Sort(methods)
		a.mux.HandleFunc(resource, func(w http.ResponseWriter, r *http.Request) {
			a.fail(w, r, "", methodNotAllowed(methods))
		})
	}
	// Whatever no pattern matches: 404 as problem+json, where the mux
	// alone would answer plain text.
	a.mux.HandleFunc("/", a.miss)
	return a
}

// api is the admin API over net/http.
type api struct {
	s         *Service
	mux       *http.ServeMux
	actor     func(*http.Request) string
	requestID func(*http.Request) string
	allow     map[string][]string // resource → the methods served, sorted: Allow
	unknown   []string            // route names served that are no route
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.unknown != nil {
		a.fail(w, r, "", fmt.Errorf("admin handler built for unknown route(s) %q", a.unknown))
		return
	}
	// The mux would redirect a path it cleans ("//rules", "/a/../b") with
	// a plain-text 307 to a Location that forgets any mount prefix: no
	// admin path needs cleaning, so such a path names no resource.
	if p := r.URL.EscapedPath(); !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.Contains(p, "/.") {
		a.fail(w, r, "", notFound())
		return
	}
	a.mux.ServeHTTP(w, r)
}

func notFound() error {
	return &httpapi.Error{Status: http.StatusNotFound, Detail: "No such admin resource."}
}

// miss answers a request no pattern matched: a path with a trailing slash
// is served as without it, anything else is 404.
func (a *api) miss(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r2 := *r
		u := *r.URL
		u.Path, u.RawPath = strings.TrimRight(p, "/"), strings.TrimRight(u.RawPath, "/")
		if u.Path == "" {
			u.Path = "/"
		}
		r2.URL = &u
		a.ServeHTTP(w, &r2)
		return
	}
	a.fail(w, r, "", notFound())
}

// endpoint serves one route: it checks what every route checks (method,
// path parameters, query text, body size and type) and runs the handler.
func (a *api) endpoint(rt *route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != rt.method {
			// HEAD, which the mux lets a GET pattern match.
			a.fail(w, r, "", methodNotAllowed(a.allow[rt.resource]))
			return
		}
		c := a.call(r, rt)
		var rep reply
		err := a.prepare(r, rt, c)
		if err == nil {
			rep, err = rt.handle(a.s, r.Context(), c)
		}
		if err != nil {
			a.s.problem(r.Context(), w, c, err)
			return
		}
		if err := writeReply(w, rep); err != nil {
			a.s.problem(r.Context(), w, c, err)
		}
	})
}

func (a *api) call(r *http.Request, rt *route) *call {
	c := &call{Method: r.Method, Header: r.Header, RequestID: a.requestID(r)}
	if rt != nil {
		c.route = rt.name
	}
	if a.actor != nil {
		c.Actor = a.actor(r)
	}
	return c
}

// fail answers err for a request that reached no route.
func (a *api) fail(w http.ResponseWriter, r *http.Request, route string, err error) {
	c := a.call(r, nil)
	c.route = route
	a.s.problem(r.Context(), w, c, err)
}

// prepare fills c from r, checking the path parameters, the query text and
// the body.
func (a *api) prepare(r *http.Request, rt *route, c *call) error {
	c.req = r
	for _, name := range rt.params {
		v := r.PathValue(name)
		if v == "" {
			return httpapi.BadRequest(httpapi.FieldError(name, "must not be empty"))
		}
		if reason := badText(v, maxText); reason != "" {
			return httpapi.BadRequest(httpapi.FieldError(name, reason))
		}
	}
	if r.URL.RawQuery != "" { // a nil url.Values reads as empty
		c.Query = r.URL.Query()
	}
	for k, vs := range c.Query {
		limit := maxText
		if k == "cursor" {
			limit = maxCursor
		}
		for _, v := range vs {
			if reason := badText(k+v, limit); reason != "" {
				return httpapi.BadRequest(httpapi.FieldError(httpapi.Truncate(k), reason))
			}
		}
	}
	if !rt.body {
		return nil
	}
	// One byte past the limit: enough to answer 413 without holding a
	// huge body.
	maxBody := a.s.o.MaxBody
	if rt.name == RouteBatch {
		maxBody = max(maxBody, MaxBatchBody)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(maxBody)+1))
	if err != nil {
		var he *httpapi.Error
		if errors.As(err, &he) { // a body the adapter could not decode
			return he
		}
		return &httpapi.Error{Status: http.StatusBadRequest, Detail: "The request body could not be read.", Err: err}
	}
	if len(body) > maxBody {
		return &httpapi.Error{Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("The request body is larger than %d bytes.", maxBody)}
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	c.Body = body
	return nil
}

// writeReply encodes a handler's reply; it writes nothing when the body
// cannot be encoded.
func writeReply(w http.ResponseWriter, rep reply) error {
	var b []byte
	if rep.body != nil {
		var err error
		if b, err = json.Marshal(rep.body); err != nil {
			return fmt.Errorf("encode %T: %w", rep.body, err)
		}
	}
	h := w.Header()
	maps.Copy(h, rep.header)
	if rep.version > 0 {
		h["Etag"] = []string{`"` + strconv.FormatInt(rep.version, 10) + `"`}
	}
	// Shared, never modified: no header slice to allocate per response.
	h["Cache-Control"] = noStore
	if b != nil {
		h["Content-Type"], h["X-Content-Type-Options"] = contentJSON, noSniff
	}
	w.WriteHeader(rep.status)
	if b != nil {
		w.Write(b)       //nolint:errcheck // the client has gone; nothing to do
		w.Write(newline) //nolint:errcheck // as above
	}
	return nil
}

// The values of the headers every reply sets; callers of writeReply's
// ResponseWriter read them and never write into them.
var (
	noStore     = []string{"no-store"}
	contentJSON = []string{"application/json"}
	noSniff     = []string{"nosniff"}
	newline     = []byte{'\n'}
)

// writeProblem sends a problem response.
func writeProblem(w http.ResponseWriter, status int, h http.Header, body []byte) {
	maps.Copy(w.Header(), h)
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client has gone; nothing to do
}
