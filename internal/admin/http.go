package admin

import (
	"io"
	"net/http"

	"github.com/sluicehq/sluice/internal/httpapi"
)

// HTTPHandler serves every admin route over net/http, through the same code
// as the Lambda functions: the local stack (cmd/sluice) mounts it at the
// root, or under a prefix with http.StripPrefix("/admin", h). actor names
// the caller for the audit log; nil records "local".
func (s *Service) HTTPHandler(actor func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read one byte past the limit: enough for Handle to answer 413
		// without holding a huge body.
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(s.maxBody)+1))
		if err != nil {
			writeResponse(w, s.Problem(r.Context(), Request{Method: r.Method},
				&httpapi.Error{Status: http.StatusBadRequest, Detail: "The request body could not be read.", Err: err}))
			return
		}
		who := "local"
		if actor != nil {
			who = actor(r)
		}
		resp := s.Handle(r.Context(), Request{
			Method:    r.Method,
			Path:      r.URL.EscapedPath(),
			Query:     r.URL.Query(),
			Header:    r.Header,
			Body:      body,
			Actor:     who,
			RequestID: r.Header.Get("X-Request-Id"),
		})
		writeResponse(w, resp)
	})
}

func writeResponse(w http.ResponseWriter, resp Response) {
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body) //nolint:errcheck // the client has gone; nothing to do
}
