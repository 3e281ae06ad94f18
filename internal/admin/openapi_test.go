package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/admin"
)

// The contract tests: every response an admin test gets (through the
// Lambda adapter, httptest servers or the handler itself) passes through
// contract.wrap, which validates it against openapi.yaml with kin-openapi:
// its status must be documented for its operation, its body must match
// the schema (which refuses undocumented fields) and its documented
// headers must be there. TestMain fails the run on any mismatch and
// reports the coverage.

var contract = newContractChecker()

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if msg := contract.report(); msg != "" {
		fmt.Println(msg)
		if strings.Contains(msg, "FAIL") && code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

type contractChecker struct {
	doc     *openapi3.T
	router  routers.Router
	problem *openapi3.Schema

	mu        sync.Mutex
	validated int
	seen      map[string]bool // "operationId status"
	failures  []string
}

func newContractChecker() *contractChecker {
	doc, err := loadSpec()
	if err != nil {
		panic(err)
	}
	// Route on the path alone: the tests' hosts are no server of the
	// document.
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		panic(fmt.Sprintf("openapi.yaml: %v", err))
	}
	return &contractChecker{doc: doc, router: r, problem: doc.Components.Schemas["Problem"].Value, seen: map[string]bool{}}
}

// loadSpec loads and validates admin.OpenAPI().
func loadSpec() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(admin.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	return doc, nil
}

// wrap returns h with every response validated.
func (c *contractChecker) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		c.check(r, rec.Code, rec.Header(), rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes()) //nolint:errcheck // the test's client reads it
	})
}

// check validates one response to r.
func (c *contractChecker) check(r *http.Request, status int, h http.Header, body []byte) {
	// Route on the escaped path, as the admin mux does (a subject may
	// hold "/"), with a trailing slash ignored, as the handler ignores it.
	req := r.Clone(context.Background())
	req.Body = http.NoBody
	// Under /admin is sluice local's mount (its server URL).
	u := *r.URL
	u.Path = strings.TrimRight(r.URL.EscapedPath(), "/")
	if p, ok := strings.CutPrefix(u.Path, "/admin/"); ok {
		u.Path = "/" + p
	}
	u.RawPath = ""
	req.URL = &u
	what := fmt.Sprintf("%s %s → %d %s", r.Method, r.URL.RequestURI(), status, truncate(body))
	route, params, err := c.router.FindRoute(req)
	// A 405 answers a method the resource lacks: no operation's (the
	// router may match /rules to /rules/{id} with an empty id).
	if err != nil || route.Method != r.Method || status == http.StatusMethodNotAllowed {
		// No operation: only the handler's own 404 and 405 problems, and
		// the 500 of a handler built for an unknown route.
		known := status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusInternalServerError
		c.record("", status, c.checkProblem(status, h, body, known), what)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 h,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	c.record(route.Operation.OperationID, status, openapi3filter.ValidateResponse(context.Background(), in), what)
}

// checkProblem validates a response no operation matched: a problem
// document of status 404, 405 (with Allow) or 500.
func (c *contractChecker) checkProblem(status int, h http.Header, body []byte, ok bool) error {
	if !ok {
		return fmt.Errorf("no operation of openapi.yaml matches, and %d is not the handler's 404, 405 or 500", status)
	}
	if status == http.StatusMethodNotAllowed && h.Get("Allow") == "" {
		return fmt.Errorf("405 without Allow")
	}
	if len(body) == 0 { // HEAD
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("problem body: %w", err)
	}
	return c.problem.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

func (c *contractChecker) record(op string, status int, err error, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failures = append(c.failures, what+"\n    "+strings.ReplaceAll(err.Error(), "\n", "\n    "))
		return
	}
	c.validated++
	if op != "" {
		c.seen[fmt.Sprintf("%s %d", op, status)] = true
	}
}

// report says what was validated, and every mismatch.
func (c *contractChecker) report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.validated == 0 && c.failures == nil {
		return ""
	}
	ops, responses, seenOps, seenResponses := 0, 0, 0, 0
	for _, item := range c.doc.Paths.Map() {
		for _, op := range item.Operations() {
			ops++
			hit := false
			for code := range op.Responses.Map() {
				responses++
				if c.seen[op.OperationID+" "+code] {
					seenResponses++
					hit = true
				}
			}
			if hit {
				seenOps++
			}
		}
	}
	msg := fmt.Sprintf("contract: %d responses validated against openapi.yaml; %d of %d operations and %d of %d documented responses seen",
		c.validated, seenOps, ops, seenResponses, responses)
	if len(c.failures) > 0 {
		msg += fmt.Sprintf("\nFAIL: %d responses differ from openapi.yaml:\n  %s", len(c.failures), strings.Join(c.failures, "\n  "))
	}
	return msg
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// TestOpenAPIRoutes holds the route table and the document equal: a route
// with no operation, or an operation with no route, fails. POST /check is
// the check function's, on the same API (infra's adminRoutes).
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	doc, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	var spec []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			spec = append(spec, method+" "+path)
		}
	}
	table := []string{"POST /check"}
	for _, r := range admin.Routes() {
		table = append(table, r.Name)
	}
	slices.Sort(spec)
	slices.Sort(table)
	if diff := cmp.Diff(table, spec); diff != "" {
		t.Errorf("openapi.yaml's operations differ from the route table (-routes +openapi.yaml):\n%s", diff)
	}
}

// TestOpenAPIServed checks GET /openapi.json answers the document.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	resp := serve(admin.New(mustMemory(), nil, nil, admin.Options{}), http.MethodGet, "/openapi.json", nil, "")
	if resp.Status != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json = %d %s, want 200 JSON", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got, want any
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(admin.OpenAPI(), &want); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(want) // numbers as JSON has them
	json.Unmarshal(b, &want)   //nolint:errcheck // just encoded
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /openapi.json differs from openapi.yaml (-yaml +served):\n%s", diff)
	}
	if _, err := openapi3.NewLoader().LoadFromData(resp.Body); err != nil {
		t.Errorf("the served document does not load: %v", err)
	}
}

// TestContractCatchesDrift proves the checker fails a response the
// document does not describe: an undocumented field, a missing one, an
// undocumented status, no operation, a problem sent as plain JSON.
func TestContractCatchesDrift(t *testing.T) {
	t.Parallel()
	c := newContractChecker()
	req := httptest.NewRequest(http.MethodGet, "/plans", nil)
	h := http.Header{"Content-Type": {"application/json"}}
	c.check(req, 200, h, []byte(`{"plans":[]}`))
	for _, bad := range []struct {
		status int
		body   string
	}{
		{200, `{"plans":[],"extra":1}`},
		{200, `{}`},
		{200, `{"plans":[{"name":"gold"}]}`},
		{418, `{"plans":[]}`},
	} {
		c.check(req, bad.status, h, []byte(bad.body))
	}
	c.check(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/nowhere"}}, 200, h, []byte(`{}`))
	c.check(req, 500, h, []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`))
	if c.validated != 1 || len(c.failures) != 6 {
		t.Errorf("validated %d, failed %d, want 1 and 6; failures:\n%s", c.validated, len(c.failures), strings.Join(c.failures, "\n"))
	}
}
