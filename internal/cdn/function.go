package cdn

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/internal/denial"
	"github.com/sluicehq/sluice/internal/headers"
	"github.com/sluicehq/sluice/internal/identity"
)

//go:embed function.js
var functionJS string

// ImportLine is the function's first line, the cloudfront-js-2.0 import
// of the KeyValueStore helper. An engine without ES modules (the
// embedded one, Node's vm) runs the source with this one line read as
// `const cf = require('cloudfront');`: Runnable.
const ImportLine = "import cf from 'cloudfront';"

// FunctionOptions are what the function is generated from.
type FunctionOptions struct {
	// StoreID is the KeyValueStore's id (a CDK token at synth).
	StoreID string
	// EdgeKey is the key subjects are hashed with (at synth, a
	// reference CloudFormation resolves at deploy).
	EdgeKey string
	// API is the API Gateway API id entries must name.
	API string
	// Sources are the authorizer's SUBJECT_SOURCES: header:, query: and
	// apikey (the x-api-key header) are read at the edge; the walk stops,
	// passing the request, at any other kind.
	Sources []identity.Source
	// Headers are the rate-limit header dialects of the 429; 0 is
	// headers.Default.
	Headers headers.Dialects
}

// Placeholder lengths of the values a synth does not know yet: a store
// id is a UUID, an API id 10 characters, the edge key 64.
const (
	storeIDLen = 36
	apiIDLen   = 10
	edgeKeyLen = 64
)

// Function returns the CloudFront Function's code for o. It fails when
// the code, with every value at its deployed length, is over
// MaxFunctionBytes.
func Function(o FunctionOptions) (string, error) {
	probe := o
	probe.StoreID, probe.API, probe.EdgeKey = strings.Repeat("s", storeIDLen), strings.Repeat("a", apiIDLen), strings.Repeat("k", edgeKeyLen)
	if n := len(render(probe)); n > MaxFunctionBytes {
		return "", fmt.Errorf("the edge function is %d bytes, over CloudFront's %d", n, MaxFunctionBytes)
	}
	return render(o), nil
}

// FunctionFor is Function of settings as the authorizer's environment
// spells them: SUBJECT_SOURCES and RATELIMIT_HEADERS ("" for their
// defaults), for a caller that holds strings (the CDK construct).
func FunctionFor(storeID, edgeKey, api, subjectSources, rateLimitHeaders string) (string, error) {
	src, err := identity.ParseSources(subjectSources) // "" is identity.DefaultSources
	if err != nil {
		return "", fmt.Errorf("subject sources: %w", err)
	}
	d, err := headers.Parse(rateLimitHeaders) // "" is headers.Default
	if err != nil {
		return "", fmt.Errorf("rate-limit headers: %w", err)
	}
	return Function(FunctionOptions{StoreID: storeID, EdgeKey: edgeKey, API: api, Sources: src, Headers: d})
}

func render(o FunctionOptions) string {
	type conf struct {
		S   string      `json:"s"`
		K   string      `json:"k"`
		A   string      `json:"a"`
		Src [][2]string `json:"src"`
		H   [][3]string `json:"h"`
		B   [][4]string `json:"b"`
	}
	c := conf{S: o.StoreID, K: o.EdgeKey, A: o.API, Src: [][2]string{}}
	for _, s := range o.Sources {
		switch s.Kind {
		case identity.SourceHeader:
			c.Src = append(c.Src, [2]string{"h", strings.ToLower(s.Name)})
		case identity.SourceQuery:
			c.Src = append(c.Src, [2]string{"q", s.Name})
		case identity.SourceAPIKey:
			c.Src = append(c.Src, [2]string{"h", "x-api-key"})
		default:
			c.Src = append(c.Src, [2]string{"x", s.String()})
		}
	}
	r := denial.TooManyRequests(o.Headers)
	for _, f := range r.Headers {
		c.H = append(c.H, [3]string{f.Name, f.Value.Var(), f.Value.Text()})
	}
	for _, f := range r.Body {
		q := `"` // a number unquoted, as the gateway's template has it
		if f.Value.Number() {
			q = ""
		}
		c.B = append(c.B, [4]string{quote(f.Name), f.Value.Var(), quote(f.Value.Text()), q})
	}
	b, _ := json.Marshal(c) // strings only
	return strings.Replace(functionJS, "__CONFIG__", string(b), 1)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Runnable is src as an engine without ES modules runs it: ImportLine
// read as a require. Nothing else changes.
func Runnable(src string) (string, error) {
	rest, ok := strings.CutPrefix(src, ImportLine)
	if !ok {
		return "", fmt.Errorf("edge function does not start with %q", ImportLine)
	}
	return "const cf = require('cloudfront');" + rest, nil
}
