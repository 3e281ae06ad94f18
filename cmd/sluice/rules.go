package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
)

func rulesCommands() []subcommand {
	return []subcommand{
		{"ls", "", "list rules (all pages)", rulesLs},
		{"get", "ID", "show one rule", getCommand("rule", "ID", printRule)},
		{"put", "[-f FILE | flags]", "create a rule, or update it (by --id or by its scope) with If-Match", rulesPut},
		{"rm", "ID", "delete a rule (If-Match the current version)", rmCommand("rule", "ID")},
		{"history", "ID", "show a rule's audit log", rulesHistory},
	}
}

func rulesLs(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "rules ls", "", "List rules, following every page.")
	a := addAdminFlags(fs)
	var f rules.Filter
	fs.StringVar(&f.API, "api", "", "only rules of this API id")
	fs.StringVar(&f.Route, "route", "", "only rules of this route")
	fs.StringVar(&f.Subject, "subject", "", "only rules of this subject")
	fs.StringVar(&f.Plan, "plan", "", "only rules naming this plan")
	_, c, err := a.connect(ctx, fs, args, 0)
	if err != nil {
		return err
	}
	all, err := listRules(ctx, c, f)
	if err != nil {
		return err
	}
	return a.print(e.stdout, all, func() { printRules(e.stdout, all) })
}

// listRules fetches every page of the rule list.
func listRules(ctx context.Context, c *adminClient, f rules.Filter) ([]rules.Rule, error) {
	all := []rules.Rule{}
	q := url.Values{}
	for k, v := range map[string]string{"api": f.API, "route": f.Route, "subject": f.Subject, "plan": f.Plan} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for range 10000 {
		var p rules.Page
		if _, err := c.getJSON(ctx, "/rules", q, &p); err != nil {
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

func printRules(w io.Writer, rs []rules.Rule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAPI\tROUTE\tSUBJECT\tLIMIT\tBURST\tMODE\tFAIL\tENABLED\tVERSION")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n",
			r.ID, r.API, r.Route, r.Subject, ruleLimit(r), ruleBurst(r),
			orDefault(string(r.Mode), string(rules.Enforce)), orDefault(string(r.FailureMode), string(rules.FailOpen)),
			strconv.FormatBool(r.Enabled == nil || *r.Enabled), r.Version)
	}
	tw.Flush()
}

// printRule shows one rule: its table row, then its description.
func printRule(w io.Writer, r rules.Rule) {
	printRules(w, []rules.Rule{r})
	if r.Description != "" {
		fmt.Fprintf(w, "\n%s\n", r.Description)
	}
}

func ruleLimit(r rules.Rule) string {
	if r.Plan != "" && r.Kind == rules.Quota {
		return "quota plan " + r.Plan
	}
	if r.Plan != "" {
		return "plan " + r.Plan
	}
	if r.Limit == nil {
		return "-"
	}
	if r.Kind == rules.Quota {
		return fmt.Sprintf("quota %d/%s", *r.Limit, r.Period)
	}
	return fmt.Sprintf("%d/%s", *r.Limit, r.Period)
}

func ruleBurst(r rules.Rule) string {
	switch {
	case r.Burst != nil:
		return strconv.FormatInt(*r.Burst, 10)
	case r.Kind == rules.Quota:
		return "-"
	case r.Plan != "":
		return "plan"
	case r.Limit != nil:
		return strconv.FormatInt(*r.Limit, 10)
	}
	return "-"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// ruleFlags are the fields `rules put` can set from flags; only the flags
// given change an existing rule.
type ruleFlags struct {
	id, file                       string
	api, route, subject, plan      string
	limit, burst, cost             int64
	period                         string
	failureMode, mode, description string
	dimension                      string
	enabled                        bool
	version                        int64
	kind, anchor                   string
	minRemaining                   int64
}

func rulesPut(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "rules put", "", `Create or update a rule.

From a file: sluice rules put -f rule.json (a Rule as JSON; "-" reads stdin).
From flags:  sluice rules put --api demo --route 'GET /search' --subject '*' --limit 10 --period 1m
A quota:     sluice rules put --api demo --route '*' --subject '*' --kind quota --limit 100000 --period 1mo

A rule with an id (--id, or "id" in the file) is updated; otherwise the rule
holding the same scope (api, route, subject, kind, dimension) is updated when there is one,
else a new rule is created. Updates send If-Match with the version given
(--version, or "version" in the file), else with the current one. On update
only the flags given change the rule.`)
	a := addAdminFlags(fs)
	var rf ruleFlags
	fs.StringVar(&rf.file, "f", "", "read the rule from this JSON file (- for stdin)")
	fs.StringVar(&rf.id, "id", "", "id of the rule to update")
	fs.StringVar(&rf.api, "api", "", "API id, or * for every API")
	fs.StringVar(&rf.route, "route", "", "route: * (whole API) or 'METHOD /resource/{param}'")
	fs.StringVar(&rf.subject, "subject", "", "subject, or * (every subject gets its own bucket)")
	fs.StringVar(&rf.plan, "plan", "", "plan name instead of inline numbers")
	fs.Int64Var(&rf.limit, "limit", 0, "tokens refilled per period (0 blocks)")
	fs.StringVar(&rf.period, "period", "", "refill period: 1s, 1m, 1h, 1d, 1w, 1y or a Go duration")
	fs.Int64Var(&rf.burst, "burst", 0, "bucket capacity (default: limit)")
	fs.Int64Var(&rf.cost, "cost", 0, "tokens per request (default 1)")
	fs.StringVar(&rf.kind, "kind", "", "rate (a token bucket, the default) or quota (a calendar window: --period 1d, 1w, 1mo or 1y)")
	fs.StringVar(&rf.anchor, "anchor", "", "a quota's windows repeat from this RFC 3339 time (default: UTC calendar alignment; \"\" clears)")
	fs.Int64Var(&rf.minRemaining, "min-remaining", 0, "admit only while at least this many tokens are left after the request")
	fs.StringVar(&rf.failureMode, "failure-mode", "", "open or closed: what happens when Redis is down")
	fs.StringVar(&rf.mode, "mode", "", "enforce or shadow")
	fs.BoolVar(&rf.enabled, "enabled", true, "whether the rule takes part in matching")
	fs.StringVar(&rf.description, "description", "", "free text")
	fs.StringVar(&rf.dimension, "dimension", "", "the dimension the rule limits (one of DIMENSIONS, such as ip); default: the default one")
	fs.Int64Var(&rf.version, "version", 0, "If-Match this version (default: the current one)")
	if _, err := a.parse(fs, args, 0); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var in rules.Rule
	fromFile := rf.file != ""
	if fromFile {
		r, err := readJSON[rules.Rule](e, "rule", rf.file)
		if err != nil {
			return err
		}
		in = r
	}
	if set["id"] {
		in.ID = rf.id
	}
	if set["version"] {
		in.Version = rf.version
	}
	c, err := newAdminClient(ctx, a.client)
	if err != nil {
		return err
	}

	// Find the rule to update: by id, else by scope.
	var cur *rules.Rule
	if in.ID != "" {
		r, err := fetch[rules.Rule](ctx, c, "rule", in.ID)
		if err != nil {
			return err
		}
		cur = &r
	} else {
		api, route, subject, kind := in.API, in.Route, in.Subject, in.Kind
		if set["kind"] {
			kind = rules.Kind(rf.kind)
		}
		if kind == "" {
			kind = rules.Rate
		}
		if set["api"] {
			api = rf.api
		}
		if set["route"] {
			route = rf.route
		}
		if set["subject"] {
			subject = rf.subject
		}
		dim := in.Dimension
		if set["dimension"] {
			dim = rf.dimension
		}
		dim = rules.NormalizeDimension(dim)
		if api != "" && route != "" && subject != "" {
			rs, err := listRules(ctx, c, rules.Filter{API: api, Route: route, Subject: subject})
			if err != nil {
				return err
			}
			for i := range rs {
				if rs[i].API == api && rs[i].Route == route && rs[i].Subject == subject && orDefault(string(rs[i].Kind), string(rules.Rate)) == string(kind) && rs[i].Dimension == dim {
					cur = &rs[i]
					break
				}
			}
		}
	}

	out := in
	if cur != nil && !fromFile {
		out = *cur // flags change only what they name
	}
	if err := applyRuleFlags(&out, rf, set); err != nil {
		return err
	}
	var got rules.Rule
	if cur == nil {
		out.ID, out.Version = "", 0
		if err := c.sendJSON(ctx, http.MethodPost, "/rules", out, 0, &got); err != nil {
			return fmt.Errorf("create rule: %w", err)
		}
		fmt.Fprintf(e.stderr, "created rule %s\n", got.ID)
	} else {
		ifMatch := cur.Version
		if in.Version > 0 {
			ifMatch = in.Version
		}
		out.ID = cur.ID
		if err := c.sendJSON(ctx, http.MethodPut, "/rules/"+url.PathEscape(cur.ID), out, ifMatch, &got); err != nil {
			return fmt.Errorf("update rule %s (If-Match %d): %w", cur.ID, ifMatch, err)
		}
		fmt.Fprintf(e.stderr, "updated rule %s to version %d\n", got.ID, got.Version)
	}
	return a.print(e.stdout, got, func() { printRules(e.stdout, []rules.Rule{got}) })
}

func applyRuleFlags(r *rules.Rule, rf ruleFlags, set map[string]bool) error {
	if set["api"] {
		r.API = rf.api
	}
	if set["route"] {
		r.Route = rf.route
	}
	if set["subject"] {
		r.Subject = rf.subject
	}
	if set["plan"] {
		r.Plan = rf.plan
		if rf.plan != "" && !set["limit"] && !set["period"] {
			r.Limit, r.Period, r.Burst = nil, 0, nil // the plan brings its numbers
		}
	}
	if set["limit"] {
		r.Limit = new(rf.limit)
		if !set["plan"] {
			r.Plan = ""
		}
	}
	if set["period"] {
		p, err := rules.ParsePeriod(rf.period)
		if err != nil {
			return usageErrorf("--period %q: %v", rf.period, err)
		}
		r.Period = p
	}
	if set["burst"] {
		r.Burst = new(rf.burst)
	}
	if set["cost"] {
		r.Cost = new(rf.cost)
	}
	if set["kind"] {
		r.Kind = rules.Kind(rf.kind)
	}
	if set["anchor"] {
		r.Anchor = rf.anchor
	}
	if set["min-remaining"] {
		r.MinRemaining = new(rf.minRemaining)
	}
	if set["failure-mode"] {
		r.FailureMode = rules.FailureMode(rf.failureMode)
	}
	if set["mode"] {
		r.Mode = rules.Mode(rf.mode)
	}
	if set["enabled"] {
		r.Enabled = new(rf.enabled)
	}
	if set["description"] {
		r.Description = rf.description
	}
	if set["dimension"] {
		r.Dimension = rf.dimension
	}
	return nil
}

func rulesHistory(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "rules history", "ID", "Show a rule's audit log, oldest first.")
	a := addAdminFlags(fs)
	pos, c, err := a.connect(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	var h admin.HistoryResponse
	if _, err := c.getJSON(ctx, "/rules/"+url.PathEscape(pos[0])+"/history", nil, &h); err != nil {
		return fmt.Errorf("rule history %s: %w", pos[0], err)
	}
	return printHistory(e.stdout, a.output, h.Entries)
}

func printHistory(w io.Writer, output string, es []rules.AuditEntry) error {
	if output == "json" {
		return printJSON(w, es)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tACTION\tACTOR\tCHANGE")
	for _, en := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", en.At.UTC().Format(time.RFC3339), en.Action, en.Actor, diffSummary(en.Before, en.After))
	}
	return tw.Flush()
}

// diffSummary names the fields that changed between two JSON objects, such
// as "limit 10→20", ignoring bookkeeping fields.
func diffSummary(before, after json.RawMessage) string {
	var b, a map[string]any
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	if b == nil && a == nil {
		return ""
	}
	if b == nil {
		return "created"
	}
	if a == nil {
		return "deleted"
	}
	skip := map[string]bool{"version": true, "updated_at": true, "created_at": true}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var parts []string
	for _, k := range sortedKeys(keys) {
		if skip[k] {
			continue
		}
		bv, av := jsonString(b[k]), jsonString(a[k])
		if bv != av {
			parts = append(parts, fmt.Sprintf("%s %s→%s", k, bv, av))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func jsonString(v any) string {
	if v == nil {
		return "∅"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
