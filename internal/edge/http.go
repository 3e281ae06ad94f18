package edge

import (
	"net"
	"net/http"

	"github.com/sluicehq/sluice/internal/authorizer"
)

// HTTP is the decision's request of a net/http request: its method, its
// headers (names is the canonical names of those the subject sources read:
// only they are copied into the single-value map; every header stays in
// the multi-value one, so a subject sent twice is refused), its query as
// r.URL.Query() decodes it (parseQuery), and as source IP the host of
// r.RemoteAddr, or with hops > 0 X-Forwarded-For's hops-th address from
// the right (Hops). The api, the route and a given subject are the
// caller's to set.
func HTTP(r *http.Request, names []string, hops int) authorizer.Request {
	req := authorizer.Request{Method: r.Method, MultiHeaders: r.Header}
	for _, name := range names {
		if vs := r.Header[name]; len(vs) > 0 {
			if req.Headers == nil {
				req.Headers = make(map[string]string, len(names))
			}
			req.Headers[name] = vs[0]
		}
	}
	req.Query, req.MultiQuery = parseQuery(r.URL.RawQuery)
	if hops > 0 {
		req.SourceIP = forwarded(r.Header["X-Forwarded-For"], hops)
	} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		req.SourceIP = host
	}
	return req
}
