package local

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/identity"
)

// TokenRequest is the body of POST /admin/token, the development issuer's
// endpoint in `sluice local`.
type TokenRequest struct {
	Sub    string            `json:"sub"`
	Claims map[string]string `json:"claims,omitempty"`
	// TTL is a Go duration such as "1h"; default 1h.
	TTL string `json:"ttl,omitempty"`
}

// TokenResponse is its answer.
type TokenResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// maxTokenRequest bounds the body of POST /admin/token, in bytes.
const maxTokenRequest = 16 << 10

// devTokenHandler serves POST /admin/token: a token from iss, the
// development issuer; nil iss answers 404, saying how to start one.
func devTokenHandler(iss *identity.DevIssuer) http.Handler {
	fail := func(w http.ResponseWriter, status int, detail string) {
		writeProblem(w, &httpapi.Error{Status: status, Detail: detail})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if iss == nil {
			fail(w, http.StatusNotFound, "This sluice local runs no development JWT issuer: start it with --subject-sources jwt:sub (or another jwt:<claim>) and no JWT_ISSUER.")
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			fail(w, http.StatusMethodNotAllowed, "POST {\"sub\": ..., \"claims\": {...}, \"ttl\": \"1h\"}")
			return
		}
		var in TokenRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, maxTokenRequest))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			fail(w, http.StatusBadRequest, "The body must be JSON {\"sub\": ..., \"claims\": {...}, \"ttl\": \"1h\"}: "+err.Error())
			return
		}
		ttl := time.Hour
		if in.TTL != "" {
			d, err := time.ParseDuration(in.TTL)
			if err != nil {
				fail(w, http.StatusBadRequest, fmt.Sprintf("ttl %q is not a duration such as 1h", in.TTL))
				return
			}
			ttl = d
		}
		now := time.Now()
		tok, err := iss.Sign(in.Sub, in.Claims, ttl, now)
		if err != nil {
			fail(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, TokenResponse{Token: tok, ExpiresAt: now.Add(ttl).UTC().Truncate(time.Second)})
	})
}
