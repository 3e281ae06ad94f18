package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/rules"
)

// adminFlags are the flags of every command that calls the admin API,
// given anywhere after the command group (`sluice rules --endpoint X ls`
// and `sluice rules ls --endpoint X` are the same).
type adminFlags struct {
	Endpoint string        `envvar:"SLUICE_ENDPOINT" default:"${default_endpoint}" help:"Admin API URL (execute-api: SigV4)."`
	Token    string        `envvar:"SLUICE_ADMIN_TOKEN" help:"Bearer token of the local admin API."`
	SigV4    bool          `name:"sigv4" help:"Sign with SigV4 (default AWS credentials)."`
	Region   string        `help:"AWS region (default: the endpoint's, then AWS_REGION)."`
	Timeout  time.Duration `default:"30s" help:"Timeout of each HTTP request."`
}

func (a *adminFlags) admin() *adminFlags { return a }

// connect builds the admin client.
func (a *adminFlags) connect(e *env) (*adminclient.Client, error) {
	return adminclient.New(e.ctx, adminclient.Options{
		Endpoint: a.Endpoint, Token: a.Token, SigV4: a.SigV4, Region: a.Region, Timeout: a.Timeout,
	})
}

// printJSON writes v indented, for scripts.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ---- shared by rules and plans ----

// fetch reads one rule or plan: kind is "rule" or "plan", key its id or
// name.
func fetch[T any](e *env, c *adminclient.Client, kind, key string) (T, error) {
	var v T
	if err := c.GetJSON(e.ctx, "/"+kind+"s/"+url.PathEscape(key), nil, &v); err != nil {
		return v, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	return v, nil
}

// show is `rules get` and `plans get`: one rule or plan, as JSON or by
// table.
func show[T any](e *env, c *adminclient.Client, kind, key string, table func(io.Writer, T)) error {
	v, err := fetch[T](e, c, kind, key)
	if err != nil {
		return err
	}
	return e.print(v, func() { table(e.stdout, v) })
}

// history is `rules history` and `plans history`: a rule's or plan's
// audit log.
func history(e *env, c *adminclient.Client, kind, key string) error {
	var h admin.HistoryResponse
	if err := c.GetJSON(e.ctx, "/"+kind+"s/"+url.PathEscape(key)+"/history", nil, &h); err != nil {
		return fmt.Errorf("%s history %s: %w", kind, key, err)
	}
	return e.print(h.Entries, func() {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tACTION\tACTOR\tCHANGE")
		for _, en := range h.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", en.At.UTC().Format(time.RFC3339), en.Action, en.Actor, diffSummary(en.Before, en.After))
		}
		tw.Flush()
	})
}

// isNotFound reports whether err is the admin API's 404.
func isNotFound(err error) bool {
	var ae *adminclient.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// remove is `rules rm` and `plans rm`: DELETE with If-Match version, or
// the current version when version is 0.
func remove(e *env, c *adminclient.Client, kind, key string, version int64) error {
	v := version
	if v == 0 {
		// Only the version is needed; the field is "version" in both.
		cur, err := fetch[struct {
			Version int64 `json:"version"`
		}](e, c, kind, key)
		if err != nil {
			return err
		}
		v = cur.Version
	}
	if err := c.SendJSON(e.ctx, http.MethodDelete, "/"+kind+"s/"+url.PathEscape(key), nil, v, nil); err != nil {
		return fmt.Errorf("delete %s %s (If-Match %d): %w", kind, key, v, err)
	}
	return e.print(map[string]any{"deleted": key, "version": v}, func() {
		fmt.Fprintf(e.stdout, "deleted %s %s (version %d)\n", kind, key, v)
	})
}

// readJSON decodes a rule or plan (kind) from file, "-" for stdin,
// refusing fields the type does not have; no file ("") is the zero T.
func readJSON[T any](e *env, kind, file string) (T, error) {
	var v T
	var (
		b   []byte
		err error
	)
	switch file {
	case "":
		return v, nil
	case "-":
		b, err = io.ReadAll(io.LimitReader(e.stdin, 1<<20))
	default:
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return v, fmt.Errorf("read %s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("read %s from %s", kind, jsonProblem(file, b, err))
	}
	return v, nil
}

// jsonProblem words a JSON decoding error of file for a person: where
// (line:column), which field, and what was expected, rather than the
// decoder's own "invalid character 'o' in literal null".
func jsonProblem(file string, b []byte, err error) string {
	// at is the position of the byte that stopped the decoder, which had
	// read off bytes by then.
	at := func(off int64) string {
		off = min(max(off-1, 0), int64(len(b)))
		line := 1 + bytes.Count(b[:off], []byte("\n"))
		col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
		return fmt.Sprintf("%s:%d:%d", file, line, col)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("%s: not valid JSON (%s); check the quotes, commas and brackets around it", at(se.Offset), strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s: field %s: must be a %s, not a %s", at(te.Offset), te.Field, te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Sprintf("%s: the JSON ends early; is a closing } or ] missing?", file)
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if name, ok := strings.CutPrefix(msg, "unknown field "); ok {
		return fmt.Sprintf("%s: unknown field %s; see the fields in docs/admin-api.md#rules", file, name)
	}
	return fmt.Sprintf("%s: %s", file, msg)
}

// flagFields are the JSON fields of a rule or plan (and stats' query)
// that a flag sets, named as the field with "-" for "_", so an error the
// admin API reports on a field names what the user typed.
var flagFields = strings.Fields(`api route subject plan limit period burst cost kind anchor min_remaining
	failure_mode mode enabled description dimension name id version window top global`)

// nameFlags rewrites the field names of a 400's field errors as the flags
// that set them, when the input came from flags (not a file).
func nameFlags(err error) error {
	var ae *adminclient.APIError
	if !errors.As(err, &ae) {
		return err
	}
	for i, f := range ae.Fields {
		if slices.Contains(flagFields, f.Field) {
			ae.Fields[i].Field = "--" + strings.ReplaceAll(f.Field, "_", "-")
		}
	}
	return err
}

// query is a query string of name-value pairs, leaving out the empty
// values: query("api", api, "route", "") is api=<api>.
func query(pairs ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			q.Set(pairs[i], pairs[i+1])
		}
	}
	return q
}

// listRules fetches every page of the rule list, 1,000 rules a page.
func listRules(e *env, c *adminclient.Client, f rules.Filter) ([]rules.Rule, error) {
	all := []rules.Rule{}
	q := query("api", f.API, "route", f.Route, "subject", f.Subject, "plan", f.Plan, "limit", "1000")
	for range 10000 {
		var p rules.Page
		if err := c.GetJSON(e.ctx, "/rules", q, &p); err != nil {
			return nil, fmt.Errorf("list rules: %w", err)
		}
		all = append(all, p.Rules...)
		if p.NextCursor == "" || p.NextCursor == q.Get("cursor") {
			return all, nil
		}
		q.Set("cursor", p.NextCursor)
	}
	return all, errors.New("list rules: too many pages")
}
