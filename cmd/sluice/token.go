package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/identity"
)

// tokenRequest is the body of POST /admin/token, the development issuer's
// endpoint in `sluice local`.
type tokenRequest struct {
	Sub    string            `json:"sub"`
	Claims map[string]string `json:"claims,omitempty"`
	// TTL is a Go duration such as "1h"; default 1h.
	TTL string `json:"ttl,omitempty"`
}

// tokenResponse is its answer.
type tokenResponse struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// maxTokenRequest bounds the body of POST /admin/token, in bytes.
const maxTokenRequest = 16 << 10

// devTokenHandler serves POST /admin/token: a token from iss, the
// development issuer; nil iss answers 404, saying how to start one.
func devTokenHandler(iss *identity.DevIssuer) http.Handler {
	fail := func(w http.ResponseWriter, status int, detail string) {
		code, h, body := httpapi.Render(httpapi.TypeBase, &httpapi.Error{Status: status, Detail: detail})
		maps.Copy(w.Header(), h)
		w.WriteHeader(code)
		w.Write(body) //nolint:errcheck // the client has gone
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
		var in tokenRequest
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
		writeJSON(w, http.StatusOK, tokenResponse{Token: tok, ExpiresAt: now.Add(ttl).UTC().Truncate(time.Second)})
	})
}

// claimFlags collects repeated --claim k=v flags.
type claimFlags map[string]string

func (c claimFlags) String() string { return "" }

func (c claimFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q is not name=value", s)
	}
	c[strings.TrimSpace(k)] = v
	return nil
}

func runToken(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "token", "", `Print a JWT signed by the development issuer of `+"`sluice local`"+` (started
with --subject-sources jwt:<claim> and no JWT_ISSUER), for trying JWT limits:

  curl -H "Authorization: Bearer $(sluice token --sub alice)" http://127.0.0.1:8080/hello

It uses the admin endpoint and token, as the other admin commands do.`)
	a := addAdminFlags(fs)
	sub := fs.String("sub", "", "the token's sub claim (required)")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	claims := claimFlags{}
	fs.Var(claims, "claim", "another claim, name=value (repeatable), such as custom:tenant=acme")
	_, c, err := a.connect(ctx, fs, args, 0)
	if err != nil {
		return err
	}
	if *sub == "" {
		fs.Usage()
		return usageErrorf("--sub is required")
	}
	var out tokenResponse
	in := tokenRequest{Sub: *sub, Claims: claims, TTL: ttl.String()}
	if err := c.sendJSON(ctx, http.MethodPost, "/token", in, 0, &out); err != nil {
		return fmt.Errorf("get a token: %w", err)
	}
	return a.print(e.stdout, out, func() { fmt.Fprintln(e.stdout, out.Token) })
}

var _ flag.Value = claimFlags{}
