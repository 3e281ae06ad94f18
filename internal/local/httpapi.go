package local

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/google/uuid"

	"github.com/sluicehq/sluice/ratelimit"
)

// The two APIs beside the REST demo API, each limited where Go handles the
// request (docs/middleware.md) and not by an authorizer: the rules name
// them by these ids, and their routes by method and path template, as for
// the REST API ("GET /httpapi/search", "GET /service/items/{id}").
const (
	// HTTPAPIID is the api id of the demo HTTP API: an API Gateway HTTP
	// API (payload format 2.0) whose routes' integration is a Lambda
	// handler wrapped by ratelimit.LimitHTTPAPI.
	HTTPAPIID = "demo-http"
	// ServiceAPI is the api of the demo service: a net/http ServeMux
	// behind ratelimit.Limiter.Handler, as on ECS, EKS or EC2.
	ServiceAPI = "demo-service"
)

// httpAPIRoutes are the demo HTTP API's route keys, as API Gateway writes
// them; the rules' route is the method and the path template. Their
// integration is one Lambda, the demo echo behind LimitHTTPAPI.
var httpAPIRoutes = []string{"GET /httpapi/hello", "GET /httpapi/search", "ANY /httpapi/items/{id}"}

// serviceRoutes are the demo service's ServeMux patterns; the middleware
// reads the route of a request from the pattern the mux routes it to
// ("GET /service/items/{id}" is route "GET /service/items/{id}").
var serviceRoutes = []string{"GET /service/hello", "GET /service/search", "/service/items/{id}"}

// resources is the path templates of routes, API Gateway style, in order.
func resources(routes []string) []string {
	out := make([]string, 0, len(routes))
	for _, r := range routes {
		_, path, ok := strings.Cut(r, " ")
		if !ok {
			path = r
		}
		out = append(out, strings.Replace(path, "...}", "+}", 1))
	}
	return out
}

// httpAPIGateway plays an API Gateway HTTP API whose routes integrate one
// Lambda function: it builds the payload format 2.0 event API Gateway
// sends for a request, gives its JSON to the function's Invoke (what the
// Lambda runtime calls: aws-lambda-go's lambda.NewHandler around the
// handler), and turns the events.APIGatewayV2HTTPResponse JSON it returns
// into the HTTP answer, as API Gateway does. The function is the demo echo
// behind ratelimit.LimitHTTPAPI, so a denied request gets its real 429.
type httpAPIGateway struct {
	apiID string
	fn    lambda.Handler
	log   *slog.Logger
}

// handle mounts g's routes on mux: each route key as a ServeMux pattern
// (an ANY route takes every method), and the rest of /httpapi/ answered as
// an HTTP API answers a request no route matches.
func (g *httpAPIGateway) handle(mux *http.ServeMux) {
	for _, key := range httpAPIRoutes {
		pattern := key
		if path, ok := strings.CutPrefix(key, "ANY "); ok {
			pattern = path
		}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { g.serve(w, r, key) })
	}
	mux.HandleFunc("/httpapi/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	})
}

// maxHTTPAPIBody is the largest request body an HTTP API passes to a
// Lambda integration (its payload quota is 10 MB).
const maxHTTPAPIBody = 10 << 20

// serve answers r, routed to routeKey.
func (g *httpAPIGateway) serve(w http.ResponseWriter, r *http.Request, routeKey string) {
	requestID := uuid.NewString()
	w.Header().Set("Apigw-Requestid", requestID)
	body, err := io.ReadAll(io.LimitReader(r.Body, maxHTTPAPIBody+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Bad Request"})
		return
	}
	if len(body) > maxHTTPAPIBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"message": "Request Entity Too Large"})
		return
	}
	ev := g.event(r, routeKey, requestID, body, time.Now())
	payload, err := json.Marshal(ev)
	if err == nil {
		payload, err = g.fn.Invoke(r.Context(), payload)
	}
	if err != nil {
		// An HTTP API answers a failed integration with this 500.
		g.log.ErrorContext(r.Context(), "HTTP API integration failed", slog.String("requestId", requestID), slog.String("error", err.Error()))
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "Internal Server Error"})
		return
	}
	if err := writeV2Response(w, payload); err != nil {
		g.log.ErrorContext(r.Context(), "HTTP API integration answered a malformed response", slog.String("requestId", requestID), slog.String("error", err.Error()))
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "Internal Server Error"})
	}
}

// event is the payload format 2.0 event API Gateway sends for r: header
// names in lower case, a repeated header or parameter joined with commas,
// cookies apart, a body that is not UTF-8 in base64.
func (g *httpAPIGateway) event(r *http.Request, routeKey, requestID string, body []byte, now time.Time) events.APIGatewayV2HTTPRequest {
	headers := make(map[string]string, len(r.Header)+1)
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			continue
		}
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	headers["host"] = r.Host
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	var params map[string]string
	_, path, _ := strings.Cut(routeKey, " ")
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "+")
			if params == nil {
				params = map[string]string{}
			}
			params[name] = r.PathValue(name)
		}
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    localAccount,
			Stage:        "$default",
			RequestID:    requestID,
			APIID:        g.apiID,
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP(r),
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

// writeV2Response writes the answer API Gateway makes of a payload format
// 2.0 integration's response: its status, headers (names as the function
// wrote them: RateLimit stays RateLimit), cookies and body. A JSON answer
// without statusCode is, as API Gateway reads it, a 200 whose body is that
// JSON.
func writeV2Response(w http.ResponseWriter, payload []byte) error {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(payload, &probe); err != nil || probe["statusCode"] == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Write(payload) //nolint:errcheck // the client has gone
		return nil
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(payload, &resp); err != nil {
		return fmt.Errorf("decode the integration's response %.200q: %w", payload, err)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return fmt.Errorf("decode the integration's base64 body: %w", err)
		}
	}
	h := w.Header()
	maps.Copy(h, resp.MultiValueHeaders)
	for k, v := range resp.Headers {
		h[k] = []string{v}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	w.Write(body) //nolint:errcheck // the client has gone
	return nil
}

// echoV2 is the demo HTTP API's Lambda handler: it answers with what the
// event told it.
func echoV2(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	b, err := json.MarshalIndent(map[string]any{
		"api":            ev.RequestContext.APIID,
		"routeKey":       ev.RouteKey,
		"method":         ev.RequestContext.HTTP.Method,
		"path":           ev.RawPath,
		"pathParameters": ev.PathParameters,
		"query":          ev.QueryStringParameters,
		"requestId":      ev.RequestContext.RequestID,
		"integration":    "Lambda (payload format 2.0) behind ratelimit.LimitHTTPAPI",
	}, "", "  ")
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b) + "\n"}, nil
}

// serviceMux is the demo service: routes that answer with what they
// received, for ratelimit.Limiter.Handler to wrap.
func serviceMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, pattern := range serviceRoutes {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
			writeJSON(w, http.StatusOK, map[string]any{
				"api":         ServiceAPI,
				"pattern":     r.Pattern,
				"method":      r.Method,
				"path":        r.URL.Path,
				"id":          r.PathValue("id"),
				"bodyBytes":   n,
				"integration": "net/http behind ratelimit.Limiter.Handler",
			})
		})
	}
	mux.HandleFunc("/service/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "No route matches " + r.URL.Path + "; the demo service has " + strings.Join(serviceRoutes, ", ")})
	})
	return mux
}

// limitedRoutes builds the HTTP API and the service over l, the Limiter
// over the local stack's own decision path, and mounts them on mux; obs
// (the Prometheus metrics) is told of each of their decisions.
func limitedRoutes(mux *http.ServeMux, l *ratelimit.Limiter, obs ratelimit.Observer, log *slog.Logger) {
	// AllowHeaders: the demo shows the numbers on every answer, as the
	// REST gateway does.
	o := ratelimit.HandlerOptions{AllowHeaders: true, Observer: obs}
	g := &httpAPIGateway{apiID: HTTPAPIID, fn: lambda.NewHandler(l.LimitHTTPAPI(echoV2, o)), log: log}
	g.handle(mux)
	so := o
	so.API = ServiceAPI
	mux.Handle("/service/", l.Handler(serviceMux(), so))
}
