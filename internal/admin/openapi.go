package admin

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the admin API's contract, OpenAPI 3.1: every route of
// the table, the check function's POST /check, their bodies, headers,
// problems and both auth schemes. The tests hold the table and the
// document equal, and validate every response they get against it.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// OpenAPI returns the admin API's OpenAPI document as written (YAML).
// The slice is the caller's own.
func OpenAPI() []byte { return append([]byte(nil), openAPIYAML...) }

// openAPIJSON is the document as GET /openapi.json serves it, converted
// once, at the first request: a cold admin Lambda that never serves it
// pays nothing.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("decode openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode openapi.yaml as JSON: %w", err)
	}
	return b, nil
})

// openAPI answers GET /openapi.json.
func (s *Service) openAPI(context.Context, *call) (reply, error) {
	b, err := openAPIJSON()
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: json.RawMessage(b)}, nil
}
