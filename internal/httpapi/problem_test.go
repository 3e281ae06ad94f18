package httpapi_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
)

func TestRender(t *testing.T) {
	t.Parallel()
	const base = "https://example.com/docs#"
	secret := errors.New("dial tcp 10.0.0.5:5432: password s3cr3t rejected")
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantHeader http.Header // besides the three every problem has
		want       httpapi.Problem
	}{
		{
			name:       "bad request with fields",
			err:        httpapi.BadRequest(httpapi.FieldError("limit", "must be an integer"), httpapi.FieldError("period", "is required")),
			wantStatus: 400,
			want: httpapi.Problem{Type: base + "invalid-request", Title: "Bad Request", Status: 400,
				Detail: "The request is invalid; see errors.",
				Errors: []rules.FieldError{{Field: "limit", Reason: "must be an integer"}, {Field: "period", Reason: "is required"}}},
		},
		{
			name: "extra header, cause kept out",
			err: &httpapi.Error{Status: 405, Detail: "Use POST.", Header: http.Header{"Allow": {"POST"}},
				Err: secret},
			wantStatus: 405,
			wantHeader: http.Header{"Allow": {"POST"}},
			want:       httpapi.Problem{Type: base + "method-not-allowed", Title: "Method Not Allowed", Status: 405, Detail: "Use POST."},
		},
		{
			name:       "wrapped Error",
			err:        fmt.Errorf("create rule: %w", &httpapi.Error{Status: 409, Detail: "Taken."}),
			wantStatus: 409,
			want:       httpapi.Problem{Type: base + "conflict", Title: "Conflict", Status: 409, Detail: "Taken."},
		},
		{
			name:       "503 with Retry-After",
			err:        &httpapi.Error{Status: 503, Detail: "Retry.", Header: http.Header{"Retry-After": {"1"}}},
			wantStatus: 503,
			wantHeader: http.Header{"Retry-After": {"1"}},
			want:       httpapi.Problem{Type: base + "unavailable", Title: "Service Unavailable", Status: 503, Detail: "Retry."},
		},
		{
			name:       "any other error is a generic 500",
			err:        secret,
			wantStatus: 500,
			want: httpapi.Problem{Type: base + "internal-error", Title: "Internal Server Error", Status: 500,
				Detail: "An internal error occurred."},
		},
		{
			name:       "Internal",
			err:        httpapi.Internal(secret),
			wantStatus: 500,
			want: httpapi.Problem{Type: base + "internal-error", Title: "Internal Server Error", Status: 500,
				Detail: "An internal error occurred."},
		},
		{
			name:       "nil",
			err:        nil,
			wantStatus: 500,
			want: httpapi.Problem{Type: base + "internal-error", Title: "Internal Server Error", Status: 500,
				Detail: "An internal error occurred."},
		},
		{
			name:       "Error without a status",
			err:        &httpapi.Error{Detail: "Oops, forgot the status."},
			wantStatus: 500,
			want: httpapi.Problem{Type: base + "internal-error", Title: "Internal Server Error", Status: 500,
				Detail: "An internal error occurred."},
		},
		{
			name:       "Error with a success status",
			err:        &httpapi.Error{Status: 200, Detail: "Fine?"},
			wantStatus: 500,
			want: httpapi.Problem{Type: base + "internal-error", Title: "Internal Server Error", Status: 500,
				Detail: "An internal error occurred."},
		},
		{
			name:       "status without a slug",
			err:        &httpapi.Error{Status: http.StatusTeapot, Detail: "Short and stout."},
			wantStatus: 418,
			want:       httpapi.Problem{Type: "about:blank", Title: "I'm a teapot", Status: 418, Detail: "Short and stout."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, h, body := httpapi.Render(base, tc.err)
			if status != tc.wantStatus {
				t.Errorf("Render(%v) status = %d, want %d", tc.err, status, tc.wantStatus)
			}
			wantHeader := http.Header{
				"Content-Type":           {"application/problem+json"},
				"Cache-Control":          {"no-store"},
				"X-Content-Type-Options": {"nosniff"},
			}
			for k, v := range tc.wantHeader {
				wantHeader[k] = v
			}
			if diff := cmp.Diff(wantHeader, h); diff != "" {
				t.Errorf("Render(%v) header mismatch (-want +got):\n%s", tc.err, diff)
			}
			if !strings.HasSuffix(string(body), "}\n") {
				t.Errorf("Render(%v) body = %q, want one JSON object and a newline", tc.err, body)
			}
			if strings.Contains(string(body), "s3cr3t") {
				t.Errorf("Render(%v) body = %s, leaks the cause", tc.err, body)
			}
			dec := json.NewDecoder(strings.NewReader(string(body)))
			dec.DisallowUnknownFields()
			var got httpapi.Problem
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("Render(%v) body %q: %v", tc.err, body, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render(%v) problem mismatch (-want +got):\n%s", tc.err, diff)
			}
		})
	}
}

// TestRenderCopiesHeader: the caller may add to the headers Render returns
// without changing the Error, which may be a shared value.
func TestRenderCopiesHeader(t *testing.T) {
	t.Parallel()
	e := &httpapi.Error{Status: 405, Header: http.Header{"Allow": {"GET"}}}
	_, h, _ := httpapi.Render(httpapi.TypeBase, e)
	h.Add("Allow", "POST")
	h.Set("Vary", "Origin")
	if diff := cmp.Diff(http.Header{"Allow": {"GET"}}, e.Header); diff != "" {
		t.Errorf("Error.Header after changing Render's header (-want +got):\n%s", diff)
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	e := &httpapi.Error{Status: 503, Detail: "Retry.", Err: cause}
	if got, want := e.Error(), "503 Retry.: boom"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(e, cause) {
		t.Errorf("errors.Is(%v, cause) = false, want true", e)
	}
	if got, want := httpapi.BadRequest().Error(), "400 The request is invalid; see errors."; got != want {
		t.Errorf("BadRequest().Error() = %q, want %q", got, want)
	}
}
