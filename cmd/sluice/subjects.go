package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/limiter"
	"github.com/sluicehq/sluice/internal/rules"
)

type subjectsCmd struct {
	adminFlags `embed:""`

	Limits  subjectsLimitsCmd  `cmd:"" help:"The rules that apply to a subject, tokens left."`
	Reset   subjectsResetCmd   `cmd:"" help:"Delete a subject's buckets (refill them)."`
	Find    subjectsFindCmd    `cmd:"" help:"A subject's keyed hash; is it a top offender?"`
	Block   subjectsBlockCmd   `cmd:"" help:"Deny a subject until a time (an expiring rule of limit 0)."`
	Unblock subjectsUnblockCmd `cmd:"" help:"Delete a subject's blocks."`
}

type subjectsBlockCmd struct {
	Subject string        `arg:"" help:"The subject, as sent."`
	API     string        `name:"api" default:"*" help:"API id (default: every API)."`
	For     time.Duration `help:"How long: 15m, 1h."`
	Until   string        `help:"Until when (RFC 3339)."`
	Reason  string        `required:"" help:"Why, for the audit log."`
}

func (cmd *subjectsBlockCmd) Run(e *env, a *adminFlags) error {
	var until time.Time
	switch {
	case (cmd.For != 0) == (cmd.Until != ""):
		return usageErrorf("give one of --for and --until")
	case cmd.For < 0:
		return usageErrorf("--for %s: want a length of time after now, such as 15m", cmd.For)
	case cmd.For > 0:
		until = time.Now().Add(cmd.For).Truncate(time.Second).Add(time.Second)
	default:
		t, err := time.Parse(time.RFC3339, cmd.Until)
		if err != nil {
			return usageErrorf("--until %q: want RFC 3339, such as 2026-12-07T18:00:00Z", cmd.Until)
		}
		if !t.After(time.Now()) {
			return usageErrorf("--until %s: already past", cmd.Until)
		}
		until = t
	}
	c, err := a.connect(e)
	if err != nil {
		return err
	}
	rs, err := listRules(e, c, rules.Filter{API: cmd.API, Route: rules.Wildcard, Subject: cmd.Subject})
	if err != nil {
		return err
	}
	r := rules.Rule{API: cmd.API, Route: rules.Wildcard, Subject: cmd.Subject, Limit: new(int64(0)),
		Period: rules.Period(time.Minute), ExpiresAt: new(until.UTC()), Description: "Blocked: " + cmd.Reason}
	var got rules.Rule
	if i := slices.IndexFunc(rs, func(r rules.Rule) bool { return (r.Kind == "" || r.Kind == rules.Rate) && r.Dimension == "" }); i >= 0 {
		cur := rs[i]
		if cur.Limit == nil || *cur.Limit != 0 || cur.Plan != "" {
			return fmt.Errorf("rule %s already limits subject %s on api %s (%s): change it with sluice rules put --id %s --limit 0 --expires-at …",
				cur.ID, cmd.Subject, cmd.API, ruleLimit(cur), cur.ID)
		}
		r.ID = cur.ID
		if err := c.SendJSON(e.ctx, http.MethodPut, "/rules/"+url.PathEscape(cur.ID), r, cur.Version, &got); err != nil {
			return fmt.Errorf("move the end of block %s: %w", cur.ID, err)
		}
	} else if err := c.SendJSON(e.ctx, http.MethodPost, "/rules", r, 0, &got); err != nil {
		return fmt.Errorf("block subject %s: %w", cmd.Subject, err)
	}
	fmt.Fprintf(e.stderr, "blocked %s on api %s until %s (rule %s; sluice subjects unblock %s ends it)\n",
		cmd.Subject, cmd.API, got.ExpiresAt.UTC().Format(time.RFC3339), got.ID, cmd.Subject)
	return e.print(got, func() { printRules(e.stdout, []rules.Rule{got}) })
}

type subjectsUnblockCmd struct {
	Subject string `arg:"" help:"The subject, as sent."`
	API     string `name:"api" help:"API id (default: every API)."`
}

func (cmd *subjectsUnblockCmd) Run(e *env, c *adminclient.Client) error {
	rs, err := listRules(e, c, rules.Filter{API: cmd.API, Subject: cmd.Subject})
	if err != nil {
		return err
	}
	n := 0
	for _, r := range rs {
		if r.Limit == nil || *r.Limit != 0 || r.Plan != "" {
			continue // a limit, not a block
		}
		if _, err := c.Do(e.ctx, http.MethodDelete, "/rules/"+url.PathEscape(r.ID), nil, nil, r.Version); err != nil {
			return fmt.Errorf("delete block %s of subject %s: %w", r.ID, cmd.Subject, err)
		}
		fmt.Fprintf(e.stderr, "deleted block %s (api %s, route %s)\n", r.ID, r.API, r.Route)
		n++
	}
	if n == 0 {
		return fmt.Errorf("no block of subject %s%s", cmd.Subject, scopeText(cmd.API, ""))
	}
	return nil
}

const dimensionUsage = "Dimension to look in (one of DIMENSIONS)."

type subjectsLimitsCmd struct {
	Subject   string `arg:"" help:"The subject, as sent (an API key, a user id)."`
	API       string `name:"api" help:"API id (default: every API)."`
	Route     string `help:"Route (default: every route)."`
	Dimension string `help:"${dimension_usage}"`
}

func (cmd *subjectsLimitsCmd) Run(e *env, c *adminclient.Client) error {
	var l admin.SubjectLimitsResponse
	if err := c.GetJSON(e.ctx, "/subjects/"+url.PathEscape(cmd.Subject)+"/limits", query("api", cmd.API, "route", cmd.Route, "dimension", cmd.Dimension), &l); err != nil {
		return fmt.Errorf("limits of subject %s: %w", cmd.Subject, err)
	}
	return e.print(l, func() {
		if len(l.Limits) == 0 {
			fmt.Fprintf(e.stdout, "no rule applies to subject %s%s: its requests are not limited (or only by DEFAULT_LIMIT)\n", cmd.Subject, scopeText(cmd.API, cmd.Route))
			return
		}
		printLimits(e.stdout, l.Limits)
	})
}

// scopeText is " on api X route Y", or "" for every API and route.
func scopeText(api, route string) string {
	var b strings.Builder
	if api != "" {
		fmt.Fprintf(&b, " on api %s", api)
	}
	if route != "" {
		fmt.Fprintf(&b, " route %q", route)
	}
	return b.String()
}

func printLimits(w io.Writer, ls []admin.BucketLimit) {
	global := slices.ContainsFunc(ls, func(l admin.BucketLimit) bool { return l.Global != nil })
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "RULE\tAPI\tROUTE\tSUBJECT\tLIMIT\tBURST\tCOST\tMODE\tFAIL\tREMAINING\tRESET\tDENIES"
	if global {
		head += "\tGLOBAL"
	}
	fmt.Fprintln(tw, head)
	for _, l := range ls {
		limit := fmt.Sprintf("%d/%s", l.Limit, l.Period)
		if l.Plan != "" {
			limit += " (plan " + l.Plan + ")"
		}
		burst := fmt.Sprint(l.Burst)
		if l.Used != nil && l.ResetsAt != nil {
			limit = fmt.Sprintf("quota %s, used %d, resets %s", limit, *l.Used, l.ResetsAt.UTC().Format("2006-01-02 15:04 UTC"))
			burst = "-" // a quota's window holds exactly its limit
		}
		if l.InFlight != nil {
			limit = fmt.Sprintf("%d in flight of %d, ttl %s", *l.InFlight, l.Limit, l.Period)
			burst = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s", l.Rule, l.API, l.Route, l.Subject,
			limit, burst, l.Cost, l.Mode, l.FailureMode, l.Remaining, humanDuration(time.Duration(l.ResetMs)*time.Millisecond), deniesText(l))
		if global {
			fmt.Fprintf(tw, "\t%s", globalText(l))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// deniesText is the DENIES cell: "-", "until deleted" (a block with no
// end), or "until 2026-12-07T12:44:10Z" when the rule admits again.
func deniesText(l admin.BucketLimit) string {
	switch {
	case !l.Denies:
		return "-"
	case l.Kind == rules.Concurrency:
		return "until a request ends"
	case l.FreesAt == nil:
		return "until deleted"
	}
	return "until " + l.FreesAt.UTC().Format(time.RFC3339)
}

// globalText is the GLOBAL cell of a global rule's limits: what every
// Region used of the window's budget, this Region's share (what its
// regional bucket spent; a quota's only), and what it holds leased and
// unspent; "-" for a regional rule.
func globalText(l admin.BucketLimit) string {
	g := l.Global
	switch {
	case g == nil:
		return "-"
	case g.Used == nil:
		return g.Error
	}
	here := ""
	if l.Used != nil {
		here = fmt.Sprintf(", this Region %d", *l.Used)
	}
	return fmt.Sprintf("used %d of %d%s, leased unspent %d", *g.Used, l.Limit, here, or(g.Leased, 0))
}

// humanDuration writes d as a person reads it, to its two largest units:
// "30d 5h", "2h 5m", "4m 10s", "1.5s", "250ms"; 0 is "0s".
func humanDuration(d time.Duration) string {
	const day = 24 * time.Hour
	for _, u := range []struct {
		unit, next time.Duration // the larger unit and the one after it
		un, nn     string
	}{{day, time.Hour, "d", "h"}, {time.Hour, time.Minute, "h", "m"}, {time.Minute, time.Second, "m", "s"}} {
		if d >= u.unit {
			d = d.Round(u.next)
			if rest := d % u.unit / u.next; rest != 0 {
				return fmt.Sprintf("%d%s %d%s", d/u.unit, u.un, rest, u.nn)
			}
			return fmt.Sprintf("%d%s", d/u.unit, u.un)
		}
	}
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

type subjectsResetCmd struct {
	Subject   string `arg:"" help:"The subject, as sent."`
	API       string `name:"api" help:"API id (default: every API)."`
	Dimension string `help:"${dimension_usage}"`
}

func (cmd *subjectsResetCmd) Run(e *env, c *adminclient.Client) error {
	// 204, no body.
	if _, err := c.Do(e.ctx, http.MethodDelete, "/subjects/"+url.PathEscape(cmd.Subject)+"/buckets", query("api", cmd.API, "dimension", cmd.Dimension), nil, 0); err != nil {
		return fmt.Errorf("reset subject %s: %w", cmd.Subject, err)
	}
	return e.print(map[string]any{"reset": cmd.Subject}, func() {
		// The authorizers' deny caches (limiter.DefaultDenyCacheMaxAge) are
		// the bound; sluice local drops its own at once.
		fmt.Fprintf(e.stdout, "reset the buckets of subject %s: sluice local admits it now, every deployed authorizer within %v\n",
			cmd.Subject, limiter.DefaultDenyCacheMaxAge)
	})
}

// subjectsFindCmd calls POST /subjects/find: the subject travels in the
// body, not the URL, so it stays out of access logs.
type subjectsFindCmd struct {
	Subject string `arg:"" help:"The subject, as sent (such as customer-42)."`
}

func (cmd *subjectsFindCmd) Help() string {
	return `The top-offender lists (sluice stats, the console) show subjects as keyed
hashes. This asks the admin API for the hash of SUBJECT and whether it is in
those lists, so you can tell whether customer-42 is the one being limited.`
}

func (cmd *subjectsFindCmd) Run(e *env, c *adminclient.Client) error {
	var out map[string]json.RawMessage
	if err := c.SendJSON(e.ctx, http.MethodPost, "/subjects/find", map[string]string{"subject": cmd.Subject}, 0, &out); err != nil {
		return fmt.Errorf("find subject %s: %w", cmd.Subject, err)
	}
	var ans admin.FindSubjectResponse
	if _, ok := out["hash"]; ok && e.output != "json" {
		b, _ := json.Marshal(out) // decoded from JSON: always marshals
		if json.Unmarshal(b, &ans) == nil {
			printFound(e, c, cmd.Subject, ans)
			return nil
		}
	}
	return e.print(out, func() {
		// An answer of another shape: its fields, one a line, as the
		// admin API names them.
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		for _, k := range slices.Sorted(maps.Keys(out)) {
			fmt.Fprintf(tw, "%s\t%s\n", k, plainJSON(out[k]))
		}
		tw.Flush()
	})
}

// printFound prints a subject's place in the top denied subjects, each
// rule named by its scope (api, route, subject); -o json has the ids.
func printFound(e *env, c *adminclient.Client, subject string, ans admin.FindSubjectResponse) {
	fmt.Fprintf(e.stdout, "subject %s is hash %s\n", subject, ans.Hash)
	switch {
	case !ans.Searched:
		fmt.Fprintln(e.stdout, "No decision statistics here to search (GET /stats is unavailable).")
		return
	case !ans.Found:
		fmt.Fprintf(e.stdout, "Not among the top denied subjects of the last %s.\n", ans.Window)
		return
	}
	fmt.Fprintf(e.stdout, "Among the top denied subjects of the last %s:\n", ans.Window)
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RANK\tAPI\tROUTE\tRULE SUBJECT\tDENIED")
	for _, m := range ans.Matches {
		route, rs := "?", "?"
		r, err := fetch[rules.Rule](e, c, "rule", m.Rule)
		switch {
		case err == nil:
			route, rs = r.Route, r.Subject
		case m.Rule == rules.DefaultID:
			route, rs = "(default)", "*"
		case isNotFound(err): // its history outlives it
			route, rs = "(deleted rule "+m.Rule+")", "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\n", m.Rank, m.API, route, rs, m.Denied)
	}
	tw.Flush()
}

// plainJSON shows a JSON value for a table: a string without quotes,
// anything else compact.
func plainJSON(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var x any
	if json.Unmarshal(v, &x) != nil {
		return string(v)
	}
	b, _ := json.Marshal(x)
	return string(b)
}
