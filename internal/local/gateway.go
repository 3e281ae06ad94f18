package local

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/sluicehq/sluice/internal/denial"
	authapigw "github.com/sluicehq/sluice/internal/edge/apigw"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
)

// The identity of the demo API in the ARNs and events the local gateway
// builds, as API Gateway would for a REST API in account 000000000000.
const (
	localRegion  = "local"
	localAccount = "000000000000"
)

// demoResources are the demo API's resources, API Gateway style. Every one
// takes ANY method.
var demoResources = []string{"/", "/hello", "/items", "/items/{id}", "/search"}

// lambdaHandler is the authorizer's Lambda entry, what the Lambda runtime
// calls with the event's bytes (internal/edge/apigw.Handler.Invoke).
type lambdaHandler interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// gateway plays API Gateway in front of the demo API: it builds the REQUEST
// authorizer event API Gateway would, sends its JSON through the
// authorizer function's Invoke (the entry the Lambda runtime calls, event
// decoding included), evaluates the returned policy against the method
// ARN, and answers Deny with the 429 the CDK gateway responses produce,
// "Unauthorized" with 401, and Allow by calling the echo backend.
type gateway struct {
	apiID, stage string
	resources    []resourceTemplate
	auth         lambdaHandler
	log          *slog.Logger
	// headers are the dialects of the rate-limit fields (RATELIMIT_HEADERS),
	// as the construct's gateway responses map them; 0 is headers.Default.
	headers headers.Dialects
}

func newGateway(apiID, stage string, resources []string, auth lambdaHandler, log *slog.Logger) *gateway {
	g := &gateway{apiID: apiID, stage: stage, auth: auth, log: log}
	for _, r := range resources {
		g.resources = append(g.resources, parseTemplate(r))
	}
	return g
}

// resourceTemplate is one resource path such as /items/{id} or /{proxy+}.
type resourceTemplate struct {
	path string
	segs []string
	id   string // the resource id in requestContext, derived from path
}

func parseTemplate(p string) resourceTemplate {
	h := fnv.New32a()
	h.Write([]byte(p))
	return resourceTemplate{path: p, segs: splitPath(p), id: strconv.FormatUint(uint64(h.Sum32()), 36)}
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// match returns the path parameters when t matches the path segments, and
// a specificity score: literal segments count most, a greedy {x+} least.
func (t resourceTemplate) match(segs []string) (map[string]string, int, bool) {
	params := map[string]string{}
	score := 0
	for i, ts := range t.segs {
		if name, ok := strings.CutPrefix(ts, "{"); ok && strings.HasSuffix(name, "+}") {
			if i >= len(segs) {
				return nil, 0, false
			}
			params[strings.TrimSuffix(name, "+}")] = strings.Join(segs[i:], "/")
			return params, score, true
		}
		if i >= len(segs) {
			return nil, 0, false
		}
		if name, ok := strings.CutPrefix(ts, "{"); ok && strings.HasSuffix(name, "}") {
			params[strings.TrimSuffix(name, "}")] = segs[i]
			score += 1
			continue
		}
		if ts != segs[i] {
			return nil, 0, false
		}
		score += 100
	}
	if len(segs) != len(t.segs) {
		return nil, 0, false
	}
	return params, score + 1, true // +1: an exact-length match beats a greedy one
}

// route finds the most specific resource matching path.
func (g *gateway) route(path string) (resourceTemplate, map[string]string, bool) {
	segs := splitPath(path)
	best, bestScore := -1, -1
	var bestParams map[string]string
	for i, t := range g.resources {
		if params, score, ok := t.match(segs); ok && score > bestScore {
			best, bestScore, bestParams = i, score, params
		}
	}
	if best < 0 {
		return resourceTemplate{}, nil, false
	}
	return g.resources[best], bestParams, true
}

// methodARN is the ARN API Gateway passes to an authorizer:
// arn:aws:execute-api:<region>:<account>:<api>/<stage>/<METHOD>/<path>.
func (g *gateway) methodARN(method, path string) string {
	return "arn:aws:execute-api:" + localRegion + ":" + localAccount + ":" +
		g.apiID + "/" + g.stage + "/" + method + "/" + strings.TrimPrefix(path, "/")
}

// event builds the REQUEST authorizer event for r, as API Gateway does.
func (g *gateway) event(r *http.Request, res resourceTemplate, params map[string]string, requestID string) events.APIGatewayCustomAuthorizerRequestTypeRequest {
	headers := make(map[string]string, len(r.Header)+1)
	multi := map[string][]string(r.Header.Clone())
	for k, vs := range r.Header {
		headers[k] = vs[len(vs)-1] // like the query string: the last value
	}
	headers["Host"], multi["Host"] = r.Host, []string{r.Host}
	var query map[string]string
	var multiQuery map[string][]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		multiQuery = q
		for k, vs := range q {
			query[k] = vs[len(vs)-1] // API Gateway keeps the last value
		}
	}
	if len(params) == 0 {
		params = nil
	}
	path := r.URL.Path
	return events.APIGatewayCustomAuthorizerRequestTypeRequest{
		Type:                            "REQUEST",
		MethodArn:                       g.methodARN(r.Method, path),
		Resource:                        res.path,
		Path:                            path,
		HTTPMethod:                      r.Method,
		Headers:                         headers,
		MultiValueHeaders:               multi,
		QueryStringParameters:           query,
		MultiValueQueryStringParameters: multiQuery,
		PathParameters:                  params,
		RequestContext: events.APIGatewayCustomAuthorizerRequestTypeRequestContext{
			Path:         "/" + g.stage + path,
			AccountID:    localAccount,
			ResourceID:   res.id,
			Stage:        g.stage,
			RequestID:    requestID,
			Identity:     events.APIGatewayCustomAuthorizerRequestTypeRequestIdentity{SourceIP: sourceIP(r)},
			ResourcePath: res.path,
			HTTPMethod:   r.Method,
			APIID:        g.apiID,
		},
	}
}

// sourceIP is the address r came from, as API Gateway's sourceIp: the
// host of RemoteAddr, or all of it when it has no port.
func sourceIP(r *http.Request) string {
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return ip
	}
	return r.RemoteAddr
}

// authorize sends ev to the authorizer function as the Lambda runtime
// does, as JSON through Invoke, and decodes its answer as API Gateway does.
func (g *gateway) authorize(ctx context.Context, ev *events.APIGatewayCustomAuthorizerRequestTypeRequest) (events.APIGatewayCustomAuthorizerResponse, error) {
	var resp events.APIGatewayCustomAuthorizerResponse
	payload, err := json.Marshal(ev)
	if err != nil {
		return resp, fmt.Errorf("encode the authorizer event: %w", err)
	}
	out, err := g.auth.Invoke(ctx, payload)
	if err != nil {
		return resp, err
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, fmt.Errorf("decode the authorizer's answer %.200q: %w", out, err)
	}
	return resp, nil
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := uuid.NewString()
	w.Header().Set("X-Amzn-Requestid", requestID)
	res, params, ok := g.route(r.URL.Path)
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{
			"message": "No resource matches " + r.URL.Path + "; the demo API has " + strings.Join(demoResources, ", "),
		})
		return
	}
	ev := g.event(r, res, params, requestID)
	resp, err := g.authorize(r.Context(), &ev)
	switch {
	case err != nil && err.Error() == authapigw.ErrUnauthorized.Error():
		// API Gateway answers 401 when the authorizer fails with exactly
		// the message "Unauthorized" (with the CDK gateway response's
		// body); it reads the message, not a Go error value.
		writeDenial(w, denial.Unauthorized(), denial.Context{RequestID: requestID})
		return
	case err != nil:
		g.log.ErrorContext(r.Context(), "authorizer failed", slog.String("requestId", requestID), slog.String("error", err.Error()))
		// API Gateway answers an authorizer failure with 500.
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": nil, "requestId": requestID})
		return
	}
	ctxv := resp.Context
	if !authapigw.Evaluate(resp.PolicyDocument, ev.MethodArn) {
		// The CDK ACCESS_DENIED gateway response: 429, the RateLimit
		// headers and a body of strings read from the authorizer context.
		writeDenial(w, denial.TooManyRequests(g.headers), denial.Context{RequestID: requestID, Authorizer: contextStrings(ctxv)})
		return
	}
	g.setRateLimitHeaders(w.Header(), ctxv)
	echo(w, r, ev, resp)
}

// setRateLimitHeaders copies the fields of the chosen header dialects of an
// allowed request from the authorizer context, when a rule applied, as the
// reference stack's demo methods map them
// (sluice.Authorizer.AllowedResponseParameters): API Gateway itself adds
// them to no allowed response.
func (g *gateway) setRateLimitHeaders(h http.Header, ctxv map[string]any) {
	if contextString(ctxv, headers.KeyRule) == "" {
		return
	}
	for _, f := range cmp.Or(g.headers, headers.Default).Fields() {
		// Assigned, not Set: Set would canonicalise RateLimit to Ratelimit.
		// Field names are case-insensitive, but people read them.
		if v := contextString(ctxv, f.Key); v != "" {
			h[f.Name] = []string{v}
		}
	}
}

// writeDenial answers with r rendered for c, byte for byte what API
// Gateway sends for the construct's gateway response.
func writeDenial(w http.ResponseWriter, r denial.Response, c denial.Context) {
	fields, body := r.Render(c)
	for name, v := range fields {
		// Assigned, not Set: Set would canonicalise RateLimit to Ratelimit.
		w.Header()[name] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(r.Status)
	w.Write(body) //nolint:errcheck // the client has gone
}

// contextStrings is the authorizer context with each value as API Gateway
// writes it into a gateway response.
func contextStrings(ctxv map[string]any) map[string]string {
	m := make(map[string]string, len(ctxv))
	for k := range ctxv {
		m[k] = contextString(ctxv, k)
	}
	return m
}

// contextString is the context's value of key as API Gateway writes it
// (identity.ContextString); "" when absent or of a type API Gateway
// refuses in a context.
func contextString(ctxv map[string]any, key string) string {
	s, _ := identity.ContextString(ctxv[key])
	return s
}

// echo is the demo API's backend: it answers with what it received,
// including the authorizer context a Lambda proxy integration would see.
func echo(w http.ResponseWriter, r *http.Request, ev events.APIGatewayCustomAuthorizerRequestTypeRequest, auth events.APIGatewayCustomAuthorizerResponse) {
	n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	authz := map[string]any{"principalId": auth.PrincipalID}
	maps.Copy(authz, auth.Context)
	writeJSON(w, http.StatusOK, map[string]any{
		"method":         r.Method,
		"path":           r.URL.Path,
		"resource":       ev.Resource,
		"pathParameters": ev.PathParameters,
		"query":          ev.MultiValueQueryStringParameters,
		"headers":        r.Header,
		"bodyBytes":      n,
		"requestId":      ev.RequestContext.RequestID,
		"authorizer":     authz,
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n')) //nolint:errcheck // the client has gone
}
