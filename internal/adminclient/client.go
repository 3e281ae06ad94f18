// Package adminclient talks to Sluice's admin API: `sluice local`'s
// /admin/ with a bearer token, or a deployed Admin REST API with
// SigV4-signed requests. The CLI's admin commands and `sluice console`'s
// proxy use it.
package adminclient

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
)

// DefaultEndpoint is the admin API of `sluice local` on its default address.
const DefaultEndpoint = "http://127.0.0.1:8080/admin"

// maxResponse bounds what the client reads from the admin API.
const maxResponse = 16 << 20

// Client talks to the admin API: the local gateway's /admin/ with a
// bearer token, or a deployed Admin REST API with SigV4-signed requests.
type Client struct {
	endpoint *url.URL // without a trailing slash
	token    string   // bearer token; empty when signing
	http     *http.Client

	// SigV4 signing; nil signer means no signing.
	signer *v4.Signer
	creds  aws.CredentialsProvider
	region string
}

// Options are the settings shared by every admin command.
type Options struct {
	// Endpoint is the admin API's URL, such as DefaultEndpoint or
	// https://<id>.execute-api.<region>.amazonaws.com/prod.
	Endpoint string
	// Token is the bearer token of sluice local; unused when signing.
	Token string
	// SigV4 signs requests even when Endpoint is not an execute-api URL.
	SigV4 bool
	// Region for SigV4; default: from the endpoint, then AWS_REGION.
	Region string
	// Timeout of each HTTP request; default 30s.
	Timeout time.Duration
}

// New builds the client. It signs requests when o.SigV4 is set or
// the endpoint is an execute-api URL, loading credentials and the region
// through the AWS SDK's default chain.
func New(ctx context.Context, o Options) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(o.Endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: want an http(s) URL such as %s", o.Endpoint, DefaultEndpoint)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	c := &Client{endpoint: u, token: o.Token, http: &http.Client{Timeout: timeout}}
	apiRegion, isAPI := ExecuteAPIRegion(u.Hostname())
	if !o.SigV4 && !isAPI {
		return c, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS config for SigV4: %w", err)
	}
	if c.region = cmp.Or(o.Region, apiRegion, cfg.Region); c.region == "" {
		return nil, errors.New("SigV4 needs a region: pass --region or set AWS_REGION")
	}
	c.signer = v4.NewSigner()
	c.creds = cfg.Credentials
	c.token = "" // IAM replaces the bearer token
	return c, nil
}

// ExecuteAPIRegion returns the region of an API Gateway default endpoint
// host (<id>.execute-api.<region>.amazonaws.com) and whether host is one.
func ExecuteAPIRegion(host string) (string, bool) {
	parts := strings.Split(strings.ToLower(host), ".")
	if len(parts) < 5 || parts[1] != "execute-api" || parts[3] != "amazonaws" {
		return "", false
	}
	return parts[2], true
}

// APIError is a non-2xx answer of the admin API, decoded from its
// problem+json body (httpapi.Problem) when there is one.
type APIError struct {
	Status int
	Title  string
	Detail string
	Fields []rules.FieldError
	// Hint says what is likely wrong on the caller's side, such as an
	// endpoint without /admin; empty when nothing is.
	Hint string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Status, http.StatusText(e.Status))
	if e.Title != "" && e.Title != http.StatusText(e.Status) {
		fmt.Fprintf(&b, ": %s", e.Title)
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Reason)
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, "\n%s", e.Hint)
	}
	return b.String()
}

// decodeAPIError reads a problem+json body; any other body (a proxy's
// error page) is shown as text, cut short.
func decodeAPIError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var p httpapi.Problem
	if json.Unmarshal(body, &p) != nil || p.Status == 0 && p.Title == "" && p.Detail == "" {
		var compact bytes.Buffer
		if json.Compact(&compact, body) == nil {
			body = compact.Bytes() // one line, not a proxy's indented JSON
		}
		e.Detail = strings.TrimSpace(string(body))
		if len(e.Detail) > 200 {
			e.Detail = e.Detail[:200] + "…"
		}
		return e
	}
	e.Title, e.Detail, e.Fields = p.Title, p.Detail, p.Errors
	return e
}

// Do sends one request to endpoint+path (path escaped by the caller) and
// returns the body of its 2xx answer. in, when not nil, is sent as JSON;
// ifMatch > 0 sets If-Match to the quoted version. A non-2xx answer is an
// *APIError.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, in any, ifMatch int64) ([]byte, error) {
	h := http.Header{"Accept": {"application/json, application/problem+json"}}
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		h.Set("Content-Type", "application/json")
	}
	if ifMatch > 0 {
		h.Set("If-Match", strconv.Quote(strconv.FormatInt(ifMatch, 10)))
	}
	req, err := c.request(ctx, method, path, query.Encode(), body, h)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w (is sluice local running, and --endpoint or SLUICE_ENDPOINT right?)", err)
	} else if err != nil {
		return nil, err // a *url.Error: it names the method and URL
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read response: %w", method, req.URL.Redacted(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := decodeAPIError(resp.StatusCode, rb)
		ae.Hint = c.hint(resp.StatusCode)
		return nil, ae
	}
	return rb, nil
}

// hint explains a 404 from an unsigned endpoint whose path does not end in
// /admin: the usual mistake is sluice local's address without /admin,
// which reaches the demo API, not the admin API.
func (c *Client) hint(status int) string {
	if status != http.StatusNotFound || c.signer != nil || strings.HasSuffix(c.endpoint.Path, "/admin") {
		return ""
	}
	return fmt.Sprintf("--endpoint %s has no /admin: sluice local's admin API is %s/admin", c.endpoint.Redacted(), c.endpoint.Redacted())
}

// request builds method endpoint+path?rawQuery (path escaped by the
// caller) with body and header h, and adds c's credentials: the bearer
// token, or a SigV4 signature of them.
func (c *Client) request(ctx context.Context, method, path, rawQuery string, body []byte, h http.Header) (*http.Request, error) {
	target := c.endpoint.String() + path
	if rawQuery != "" {
		target += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header = h
	if c.signer == nil {
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		return req, nil
	}
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("retrieve AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", c.region, time.Now()); err != nil {
		return nil, fmt.Errorf("sign request: %w", err)
	}
	return req, nil
}

// GetJSON fetches path and decodes the answer into out.
func (c *Client) GetJSON(ctx context.Context, path string, query url.Values, out any) error {
	b, err := c.Do(ctx, http.MethodGet, path, query, nil, 0)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// SendJSON sends in with method and decodes the answer into out (when out
// is not nil and the answer has a body).
func (c *Client) SendJSON(ctx context.Context, method, path string, in any, ifMatch int64, out any) error {
	b, err := c.Do(ctx, method, path, nil, in, ifMatch)
	if err != nil {
		return err
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %s answer: %w", path, err)
		}
	}
	return nil
}
