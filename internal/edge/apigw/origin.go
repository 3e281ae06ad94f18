package apigw

import (
	"context"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"strings"
)

// OriginVerifyHeader is the header the CDN edge's distribution adds to
// every request it sends the REST API, and the authorizer requires when
// Options.OriginVerify is set: a request that did not come through the
// distribution does not carry its value.
const OriginVerifyHeader = "X-Origin-Verify"

// originVerified reports whether the event's headers carry exactly one
// X-Origin-Verify whose value is h's (true when h has none to require).
// headers is the single-value map (any case; API Gateway keeps the
// sender's), multi the multi-value one (REST; nil for an HTTP API, whose
// map joins repeated headers with commas, which a value cannot hold). The
// comparison takes the same time for every value of a given length.
func (h *Handler) originVerified(headers map[string]string, multi map[string][]string) bool {
	if h.origin == nil {
		return true
	}
	var got string
	n := 0
	for k, v := range headers {
		if strings.EqualFold(k, OriginVerifyHeader) {
			got = v
			n++
		}
	}
	for k, vs := range multi {
		if strings.EqualFold(k, OriginVerifyHeader) && len(vs) != 1 {
			return false
		}
	}
	return n == 1 && subtle.ConstantTimeCompare([]byte(got), h.origin) == 1
}

// refuseOrigin logs and counts a request the origin check refused, and
// returns ErrUnauthorized: API Gateway answers 401, as it does itself
// when the header is missing (an identity source), not ACCESS_DENIED,
// which the stack turns into a 429 telling the sender to come back. The
// line names neither the value sent nor the subject.
func (h *Handler) refuseOrigin(ctx context.Context) error {
	h.m.Unauthorized()
	h.log.LogAttrs(ctx, slog.LevelWarn, "request not through the edge's distribution",
		slog.String("header", OriginVerifyHeader), slog.Int("status", http.StatusUnauthorized))
	return ErrUnauthorized
}
