package adminclient

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// Endpoint is the admin API's URL, its credentials redacted.
func (c *Client) Endpoint() string { return c.endpoint.Redacted() }

// Signed reports whether requests are SigV4-signed (a deployed stack).
func (c *Client) Signed() bool { return c.signer != nil }

// Auth says how requests are authorised: "bearer token" or SigV4 with the
// caller's AWS credentials and the region.
func (c *Client) Auth() string {
	if c.signer != nil {
		return "SigV4, your AWS credentials (" + c.region + ")"
	}
	if c.token == "" {
		return "no credentials: neither --token nor SLUICE_ADMIN_TOKEN is set, so sluice local will answer 401"
	}
	return "bearer token from --token or SLUICE_ADMIN_TOKEN"
}

// proxiedHeaders are the request and response headers the admin API uses;
// nothing else crosses the proxy (no cookies, no browser Authorization).
var (
	proxiedRequest  = []string{"Accept", "Content-Type", "If-Match"}
	proxiedResponse = []string{"Content-Type", "Etag", "Location", "Allow", "Retry-After", "Cache-Control", "Accept-Post"}
)

// upstreamHeader is the response header Proxy adds to every answer: the
// admin API it forwards to (Endpoint, credentials redacted), which the
// console shows in its header so that an operator sees which stack they
// act on.
const upstreamHeader = "Sluice-Upstream"

// Proxy forwards each request, path and query as they are, to the admin
// API, authorised as every call of c is (signed, or with the bearer
// token): `sluice console`'s browser calls go through it. The answer,
// error statuses and problem documents included, goes back unchanged,
// with upstreamHeader added.
func (c *Client) Proxy() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(upstreamHeader, c.Endpoint())
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read request body", http.StatusBadRequest)
			return
		}
		h := http.Header{}
		for _, k := range proxiedRequest {
			if v := r.Header.Get(k); v != "" {
				h.Set(k, v)
			}
		}
		req, err := c.request(r.Context(), r.Method, r.URL.EscapedPath(), r.URL.RawQuery, body, h)
		if err != nil {
			writeProxyError(w, err)
			return
		}
		resp, err := c.http.Do(req)
		if err != nil {
			writeProxyError(w, err)
			return
		}
		defer resp.Body.Close()
		for _, k := range proxiedResponse {
			if v := resp.Header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, io.LimitReader(resp.Body, maxResponse)) //nolint:errcheck // the browser has gone
	})
}

// writeProxyError answers a failure to reach or sign for the admin API as
// a problem document the console shows like any other.
func writeProxyError(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(http.StatusBadGateway)
	b, _ := json.Marshal(httpapi.Problem{Type: "about:blank", Title: "Bad Gateway", Status: http.StatusBadGateway,
		Detail: "sluice console could not reach the admin API: " + err.Error()})
	w.Write(b) //nolint:errcheck // the browser has gone
}
