package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/local"
	"github.com/sluicehq/sluice/internal/rules"
)

type rulesCmd struct {
	adminFlags `embed:""`

	Ls      rulesLsCmd      `cmd:"" help:"List rules."`
	Get     rulesGetCmd     `cmd:"" help:"Show one rule."`
	Put     rulesPutCmd     `cmd:"" help:"Create a rule, or update it (by --id or scope)."`
	Rm      rulesRmCmd      `cmd:"" help:"Delete a rule."`
	History rulesHistoryCmd `cmd:"" help:"Show a rule's audit log."`
}

type rulesLsCmd struct {
	API     string `name:"api" help:"By API id."`
	Route   string `help:"By route."`
	Subject string `help:"By subject."`
	Plan    string `help:"By plan."`
}

func (cmd *rulesLsCmd) Run(e *env, c *adminclient.Client) error {
	all, err := listRules(e, c, rules.Filter{API: cmd.API, Route: cmd.Route, Subject: cmd.Subject, Plan: cmd.Plan})
	if err != nil {
		return err
	}
	return e.print(all, func() { printRules(e.stdout, all) })
}

type rulesGetCmd struct {
	ID string `arg:"" name:"id" help:"The rule's id."`
}

func (cmd *rulesGetCmd) Run(e *env, c *adminclient.Client) error {
	return show(e, c, "rule", cmd.ID, printRule)
}

type rulesRmCmd struct {
	ID      string `arg:"" name:"id" help:"The rule's id."`
	Version int64  `help:"If-Match this version (default: current)."`
}

func (cmd *rulesRmCmd) Run(e *env, c *adminclient.Client) error {
	return remove(e, c, "rule", cmd.ID, cmd.Version)
}

type rulesHistoryCmd struct {
	ID string `arg:"" name:"id" help:"The rule's id."`
}

func (cmd *rulesHistoryCmd) Run(e *env, c *adminclient.Client) error {
	return history(e, c, "rule", cmd.ID)
}

func printRules(w io.Writer, rs []rules.Rule) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// SET and EXPIRES only when a rule has one: the usual table stays as
	// it was.
	extra := slices.ContainsFunc(rs, func(r rules.Rule) bool { return r.Set != "" || r.ExpiresAt != nil })
	head := "ID\tAPI\tROUTE\tSUBJECT\tLIMIT\tBURST\tMODE\tFAIL\tENABLED\tVERSION"
	if extra {
		head += "\tSET\tEXPIRES"
	}
	fmt.Fprintln(tw, head)
	now := time.Now()
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d",
			r.ID, r.API, r.Route, r.Subject, ruleLimit(r), ruleBurst(r),
			cmp.Or(r.Mode, rules.Enforce), cmp.Or(r.FailureMode, rules.FailOpen),
			strconv.FormatBool(r.Enabled == nil || *r.Enabled), r.Version)
		if extra {
			fmt.Fprintf(tw, "\t%s\t%s", cmp.Or(r.Set, "-"), expires(r, now))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printRule shows one rule: its table row, then its description, then,
// for a global rule, the key its budget has in the ledger of every Region.
func printRule(w io.Writer, r rules.Rule) {
	printRules(w, []rules.Rule{r})
	if r.Description != "" {
		fmt.Fprintf(w, "\n%s\n", r.Description)
	}
	if r.Global {
		fmt.Fprintf(w, "\nglobal: one budget across every Region, ledger key %s\n", rules.GlobalKey(r))
	}
}

// expires says when r stops applying: "-" never, "expired 2026-12-05T18:00:00Z",
// or "2026-12-05T18:00:00Z (in 3h0m0s)".
func expires(r rules.Rule, now time.Time) string {
	switch {
	case r.ExpiresAt == nil:
		return "-"
	case r.Expired(now):
		return "expired " + r.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%s (in %s)", r.ExpiresAt.UTC().Format(time.RFC3339), r.ExpiresAt.Sub(now).Truncate(time.Second))
}

// ruleLimit is the LIMIT cell: "100/1m", "quota 5/1d", "plan gold", with
// "global " first for a global rule.
func ruleLimit(r rules.Rule) string {
	if r.Global {
		r.Global = false
		return "global " + ruleLimit(r)
	}
	if r.Plan != "" {
		return map[rules.Kind]string{rules.Quota: "quota ", rules.Concurrency: "in-flight "}[r.Kind] + "plan " + r.Plan
	}
	if r.Limit == nil {
		return "-"
	}
	l := planLimit(rules.Plan{Kind: r.Kind, Limit: *r.Limit, Period: r.Period})
	if r.Kind == rules.Quota {
		return "quota " + l
	}
	return l
}

func ruleBurst(r rules.Rule) string {
	switch {
	case r.Burst != nil:
		return strconv.FormatInt(*r.Burst, 10)
	case r.Kind == rules.Quota || r.Kind == rules.Concurrency:
		return "-"
	case r.Plan != "":
		return "plan"
	case r.Limit != nil:
		return strconv.FormatInt(*r.Limit, 10)
	}
	return "-"
}

// rulesPutCmd sets from flags the fields of a rule: a nil field was not
// given, and on update only the flags given change the rule.
type rulesPutCmd struct {
	File         string  `short:"f" name:"file" placeholder:"FILE" help:"The rule as JSON (-: stdin)."`
	ID           *string `name:"id" help:"Rule to update."`
	API          *string `name:"api" help:"API id, or * for every API."`
	Route        *string `help:"* (whole API) or 'METHOD /resource/{param}'."`
	Subject      *string `help:"Subject, or * (each its own bucket)."`
	Plan         *string `help:"Plan name instead of inline numbers."`
	Limit        *int64  `help:"Tokens per period (0 blocks)."`
	Period       *string `help:"Refill period: 1s, 1m, 1h, 1d, 1w, 1y or a Go duration."`
	Burst        *int64  `help:"Bucket capacity (default: limit)."`
	Cost         *int64  `help:"Tokens per request (default 1)."`
	Kind         *string `help:"rate (default), quota (--period 1d, 1w, 1mo, 1y) or concurrency (--period is the slot TTL)."`
	Anchor       *string `help:"Quota windows repeat from this RFC 3339 time (\"\" clears)."`
	MinRemaining *int64  `name:"min-remaining" help:"Admit only while this many tokens stay left."`
	FailureMode  *string `name:"failure-mode" help:"open or closed, when Redis is down."`
	Mode         *string `help:"enforce or shadow."`
	Enabled      *bool   `help:"Whether the rule is matched."`
	Global       *bool   `help:"One budget across every Region."`
	ExpiresAt    *string `name:"expires-at" placeholder:"TIME" help:"Stop applying at this RFC 3339 time (\"\" clears)."`
	Description  *string `help:"Free text."`
	Dimension    *string `help:"Dimension limited (one of DIMENSIONS)."`
	Version      *int64  `help:"If-Match this version (default: current)."`
}

func (cmd *rulesPutCmd) Help() string {
	return `From a file (a Rule as JSON; "-" reads stdin), from flags, a quota:

  sluice rules put -f rule.json
  sluice rules put --api demo --route 'GET /search' --subject '*' --limit 10 --period 1m
  sluice rules put --api demo --route '*' --subject '*' --kind quota --limit 100000 --period 1mo

A rule with an id (--id, or "id" in the file) is updated; otherwise the rule
holding the same scope (api, route, subject, kind, dimension) is updated when
there is one, else a new rule is created. Updates send If-Match with the
version given (--version, or "version" in the file), else with the current
one. On update only the flags given change the rule.`
}

func (cmd *rulesPutCmd) Run(e *env, a *adminFlags) error {
	fromFile := cmd.File != ""
	in, err := readJSON[rules.Rule](e, "rule", cmd.File)
	if err != nil {
		return err
	}
	setFlag(&in.ID, cmd.ID)
	setFlag(&in.Version, cmd.Version)
	c, err := a.connect(e)
	if err != nil {
		return err
	}

	// Find the rule to update: by id, else by scope.
	var cur *rules.Rule
	if in.ID != "" {
		r, err := fetch[rules.Rule](e, c, "rule", in.ID)
		if err != nil {
			return err
		}
		cur = &r
	} else {
		api, route, subject := or(cmd.API, in.API), or(cmd.Route, in.Route), or(cmd.Subject, in.Subject)
		kind := cmp.Or(rules.Kind(or(cmd.Kind, string(in.Kind))), rules.Rate)
		dim := rules.NormalizeDimension(or(cmd.Dimension, in.Dimension))
		if api != "" && route != "" && subject != "" {
			rs, err := listRules(e, c, rules.Filter{API: api, Route: route, Subject: subject})
			if err != nil {
				return err
			}
			for i := range rs {
				if rs[i].API == api && rs[i].Route == route && rs[i].Subject == subject && cmp.Or(rs[i].Kind, rules.Rate) == kind && rs[i].Dimension == dim {
					cur = &rs[i]
					break
				}
			}
		}
	}

	if cur != nil {
		warnOwned(e, "rules put", "rule", cur.ID, cur.Set)
	}
	out := in
	if cur != nil && !fromFile {
		out = *cur // flags change only what they name
	}
	if err := cmd.apply(&out); err != nil {
		return err
	}
	warnNeverMatches(e, c, out.API, out.Route)
	key, curVersion := "", int64(0)
	if cur != nil {
		key, curVersion, out.ID = cur.ID, cur.Version, cur.ID
	} else {
		out.Version = 0
	}
	got, err := save(e, c, "rule", key, out, curVersion, in.Version, fromFile, func(r rules.Rule) (string, int64) { return r.ID, r.Version })
	if err != nil {
		return err
	}
	return e.print(got, func() { printRules(e.stdout, []rules.Rule{got}) })
}

// save writes v, a rule or plan (kind) from a file (fromFile) or from
// flags, through the admin API: a create when cur, the version held, is 0
// (none is), else an update of key with If-Match: version, or cur when
// version is 0. It says on stderr what it did, naming the result by
// name's key; a field error names the flags when v came from flags.
func save[T any](e *env, c *adminclient.Client, kind, key string, v T, cur, version int64, fromFile bool, name func(T) (string, int64)) (T, error) {
	ifMatch := cur
	if cur > 0 && version > 0 {
		ifMatch = version
	}
	method, path, what := http.MethodPost, "/"+kind+"s", strings.TrimSpace("create "+kind+" "+key)
	if ifMatch > 0 {
		method, path, what = http.MethodPut, path+"/"+url.PathEscape(key), fmt.Sprintf("update %s %s (If-Match %d)", kind, key, ifMatch)
	}
	var got T
	if err := c.SendJSON(e.ctx, method, path, v, ifMatch, &got); err != nil {
		if !fromFile {
			err = nameFlags(err)
		}
		return got, fmt.Errorf("%s: %w", what, err)
	}
	id, gotVersion := name(got)
	if ifMatch == 0 {
		fmt.Fprintf(e.stderr, "created %s %s\n", kind, id)
	} else {
		fmt.Fprintln(e.stderr, updatedLine(kind, id, ifMatch, gotVersion))
	}
	return got, nil
}

// updatedLine is what an update says on stderr: the admin API answers a
// write that changes nothing with the version it was at (no new version,
// no audit entry), so the version equal to If-Match means unchanged.
func updatedLine(what, id string, ifMatch, version int64) string {
	if version == ifMatch {
		return fmt.Sprintf("%s %s unchanged (already so at version %d)", what, id, version)
	}
	return fmt.Sprintf("updated %s %s to version %d", what, id, version)
}

// warnOwned warns, on stderr, that the rule or plan key a command
// changes belongs to set (none when ""): `sluice apply` of that set puts
// back what its file says, and a plan saved before the change is refused.
func warnOwned(e *env, cmd, kind, key, set string) {
	if set != "" {
		fmt.Fprintf(e.stderr, "sluice: %s: warning: %s %s belongs to set %s: the next `sluice apply` of it reverts this change, "+
			"and a plan saved before it (apply --plan) fails; change the file too\n", cmd, kind, key, set)
	}
}

// warnNeverMatches warns, on stderr, of a rule sluice local can tell will
// never match: an api it does not serve, a route that is a path and not a
// resource template. The rule is written all the same (a rule may be
// written before its API exists). A deployed stack's admin API does not
// know the protected APIs' resources: nothing is checked there (see
// docs/local.md).
func warnNeverMatches(e *env, c *adminclient.Client, api, route string) {
	if c.Signed() {
		return
	}
	var rs local.Resources
	if err := c.GetJSON(e.ctx, "/resources", nil, &rs); err != nil {
		return // not sluice local, or an older one
	}
	for _, w := range rs.Warnings(api, route) {
		fmt.Fprintf(e.stderr, "sluice: rules put: warning: %s\n", w)
	}
}

// or is *p when p is set, else def.
func or[T any](p *T, def T) T {
	if p != nil {
		return *p
	}
	return def
}

// apply sets the fields whose flags were given.
func (cmd *rulesPutCmd) apply(r *rules.Rule) error {
	setFlag(&r.API, cmd.API)
	setFlag(&r.Route, cmd.Route)
	setFlag(&r.Subject, cmd.Subject)
	if cmd.Plan != nil {
		r.Plan = *cmd.Plan
		if *cmd.Plan != "" && cmd.Limit == nil && cmd.Period == nil {
			r.Limit, r.Period, r.Burst = nil, 0, nil // the plan brings its numbers
		}
	}
	if cmd.Limit != nil {
		r.Limit = new(*cmd.Limit)
		if cmd.Plan == nil {
			r.Plan = ""
		}
	}
	if err := setPeriod(&r.Period, cmd.Period); err != nil {
		return err
	}
	setFlagNew(&r.Burst, cmd.Burst)
	setFlagNew(&r.Cost, cmd.Cost)
	setFlag(&r.Kind, (*rules.Kind)(cmd.Kind))
	setFlag(&r.Anchor, cmd.Anchor)
	setFlagNew(&r.MinRemaining, cmd.MinRemaining)
	setFlag(&r.FailureMode, (*rules.FailureMode)(cmd.FailureMode))
	setFlag(&r.Mode, (*rules.Mode)(cmd.Mode))
	setFlagNew(&r.Enabled, cmd.Enabled)
	setFlag(&r.Global, cmd.Global)
	setFlag(&r.Description, cmd.Description)
	setFlag(&r.Dimension, cmd.Dimension)
	if cmd.ExpiresAt != nil {
		r.ExpiresAt = nil
		if *cmd.ExpiresAt != "" {
			at, err := time.Parse(time.RFC3339, *cmd.ExpiresAt)
			if err != nil {
				return usageErrorf("--expires-at %q: want an RFC 3339 time, such as 2026-12-31T23:59:59Z", *cmd.ExpiresAt)
			}
			r.ExpiresAt = &at
		}
	}
	return nil
}

// setFlag sets *dst to the value of the flag p, when it was given.
func setFlag[T any](dst *T, p *T) {
	if p != nil {
		*dst = *p
	}
}

// setFlagNew points *dst at a copy of the value of the flag p, when it was
// given.
func setFlagNew[T any](dst **T, p *T) {
	if p != nil {
		*dst = new(*p)
	}
}

// setPeriod sets *dst to the period of the flag --period p, when it was
// given.
func setPeriod(dst *rules.Period, p *string) error {
	if p == nil {
		return nil
	}
	v, err := rules.ParsePeriod(*p)
	if err != nil {
		return usageErrorf("--period %q: %v", *p, err)
	}
	*dst = v
	return nil
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
	keys := slices.Concat(slices.Collect(maps.Keys(a)), slices.Collect(maps.Keys(b)))
	slices.Sort(keys)
	var parts []string
	for _, k := range slices.Compact(keys) {
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
