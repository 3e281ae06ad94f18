package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
)

// adminFlags are the flags every admin subcommand takes.
type adminFlags struct {
	client clientOptions
	output string
}

func addAdminFlags(fs *flag.FlagSet) *adminFlags {
	a := &adminFlags{}
	endpoint := os.Getenv("SLUICE_ENDPOINT")
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	fs.StringVar(&a.client.Endpoint, "endpoint", endpoint, "admin API URL (env SLUICE_ENDPOINT); an execute-api URL turns on SigV4")
	// The token's default is read in check, not here: -h would print it.
	fs.StringVar(&a.client.Token, "token", "", "bearer token of the local admin API (env SLUICE_ADMIN_TOKEN)")
	fs.BoolVar(&a.client.SigV4, "sigv4", false, "sign requests with SigV4 (service execute-api, default AWS credential chain)")
	fs.StringVar(&a.client.Region, "region", "", "AWS region for SigV4 (default: from the endpoint, then AWS_REGION)")
	fs.DurationVar(&a.client.Timeout, "timeout", 30*time.Second, "timeout of each HTTP request")
	fs.StringVar(&a.output, "o", "table", "output: table or json")
	return a
}

func (a *adminFlags) check() error {
	if a.client.Token == "" {
		a.client.Token = os.Getenv("SLUICE_ADMIN_TOKEN")
	}
	if a.output != "table" && a.output != "json" {
		return usageErrorf("-o %q: want table or json", a.output)
	}
	return nil
}

// env carries a command's streams, so tests can run commands in-process.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
}

// subcommand is one leaf command such as `rules ls`.
type subcommand struct {
	name, args, help string
	run              func(ctx context.Context, e env, args []string) error
}

// runGroup dispatches `sluice <group> <sub> ...`.
func runGroup(ctx context.Context, e env, group string, subs []subcommand, args []string) error {
	usage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: sluice %s <command> [flags]\n\ncommands:\n", group)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range subs {
			fmt.Fprintf(tw, "  %s %s\t%s\n", s.name, s.args, s.help)
		}
		tw.Flush()
		fmt.Fprintf(w, "\nRun `sluice %s <command> -h` for the flags of one command.\n", group)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, e, args[1:])
		}
	}
	usage(e.stderr)
	return usageErrorf("unknown command %q", group+" "+args[0])
}

// newFlagSet returns a FlagSet whose usage names the command and its
// positional arguments.
func newFlagSet(e env, name, args, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: sluice %s [flags] %s\n\n%s\n\nflags:\n", name, args, help)
		fs.PrintDefaults()
	}
	return fs
}

// parseArgs parses flags that may come before or after the positional
// arguments (`rules get ID -o json` and `rules get -o json ID` both work)
// and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func wantArgs(fs *flag.FlagSet, pos []string, n int) error {
	if len(pos) != n {
		fs.Usage()
		return usageErrorf("%s: want %d argument(s), got %d", fs.Name(), n, len(pos))
	}
	return nil
}

// parse parses a command's arguments, wants n positional ones and checks
// the admin flags; it returns the positional arguments.
func (a *adminFlags) parse(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if err := wantArgs(fs, pos, n); err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	return pos, nil
}

// connect is parse followed by the admin client, for the commands that
// need nothing else first.
func (a *adminFlags) connect(ctx context.Context, fs *flag.FlagSet, args []string, n int) ([]string, *adminClient, error) {
	pos, err := a.parse(fs, args, n)
	if err != nil {
		return nil, nil, err
	}
	c, err := newAdminClient(ctx, a.client)
	if err != nil {
		return nil, nil, err
	}
	return pos, c, nil
}

// print writes v as JSON with -o json, else calls table.
func (a *adminFlags) print(w io.Writer, v any, table func()) error {
	if a.output == "json" {
		return printJSON(w, v)
	}
	table()
	return nil
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
func fetch[T any](ctx context.Context, c *adminClient, kind, key string) (T, error) {
	var v T
	if _, err := c.getJSON(ctx, "/"+kind+"s/"+url.PathEscape(key), nil, &v); err != nil {
		return v, fmt.Errorf("get %s %s: %w", kind, key, err)
	}
	return v, nil
}

// getCommand is `rules get` and `plans get`: fetch one and show it as
// JSON or with table.
func getCommand[T any](kind, arg string, table func(io.Writer, T)) func(ctx context.Context, e env, args []string) error {
	return func(ctx context.Context, e env, args []string) error {
		fs := newFlagSet(e, kind+"s get", arg, "Show one "+kind+".")
		a := addAdminFlags(fs)
		pos, c, err := a.connect(ctx, fs, args, 1)
		if err != nil {
			return err
		}
		v, err := fetch[T](ctx, c, kind, pos[0])
		if err != nil {
			return err
		}
		return a.print(e.stdout, v, func() { table(e.stdout, v) })
	}
}

// rmCommand is `rules rm` and `plans rm`: DELETE with If-Match --version,
// or the current version when none is given.
func rmCommand(kind, arg string) func(ctx context.Context, e env, args []string) error {
	return func(ctx context.Context, e env, args []string) error {
		fs := newFlagSet(e, kind+"s rm", arg, "Delete a "+kind+". If-Match sends --version, else the current version.")
		a := addAdminFlags(fs)
		version := fs.Int64("version", 0, "If-Match this version (default: the current one)")
		pos, c, err := a.connect(ctx, fs, args, 1)
		if err != nil {
			return err
		}
		key := pos[0]
		v := *version
		if v == 0 {
			// Only the version is needed; the field is "version" in both.
			cur, err := fetch[struct {
				Version int64 `json:"version"`
			}](ctx, c, kind, key)
			if err != nil {
				return err
			}
			v = cur.Version
		}
		if err := c.sendJSON(ctx, http.MethodDelete, "/"+kind+"s/"+url.PathEscape(key), nil, v, nil); err != nil {
			return fmt.Errorf("delete %s %s (If-Match %d): %w", kind, key, v, err)
		}
		return a.print(e.stdout, map[string]any{"deleted": key, "version": v}, func() {
			fmt.Fprintf(e.stdout, "deleted %s %s (version %d)\n", kind, key, v)
		})
	}
}

// ---- rules ----

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
	if r.Plan != "" {
		return "plan " + r.Plan
	}
	if r.Limit == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%s", *r.Limit, r.Period)
}

func ruleBurst(r rules.Rule) string {
	switch {
	case r.Burst != nil:
		return strconv.FormatInt(*r.Burst, 10)
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
	enabled                        bool
	version                        int64
}

func rulesPut(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "rules put", "", `Create or update a rule.

From a file: sluice rules put -f rule.json (a Rule as JSON; "-" reads stdin).
From flags:  sluice rules put --api demo --route 'GET /search' --subject '*' --limit 10 --period 1m

A rule with an id (--id, or "id" in the file) is updated; otherwise the rule
holding the same scope (api, route, subject) is updated when there is one,
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
	fs.StringVar(&rf.failureMode, "failure-mode", "", "open or closed: what happens when Redis is down")
	fs.StringVar(&rf.mode, "mode", "", "enforce or shadow")
	fs.BoolVar(&rf.enabled, "enabled", true, "whether the rule takes part in matching")
	fs.StringVar(&rf.description, "description", "", "free text")
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
		api, route, subject := in.API, in.Route, in.Subject
		if set["api"] {
			api = rf.api
		}
		if set["route"] {
			route = rf.route
		}
		if set["subject"] {
			subject = rf.subject
		}
		if api != "" && route != "" && subject != "" {
			rs, err := listRules(ctx, c, rules.Filter{API: api, Route: route, Subject: subject})
			if err != nil {
				return err
			}
			for i := range rs {
				if rs[i].API == api && rs[i].Route == route && rs[i].Subject == subject {
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
	return nil
}

// readJSON decodes a rule or plan (kind) from file, "-" for stdin,
// refusing fields the type does not have.
func readJSON[T any](e env, kind, file string) (T, error) {
	var v T
	b, err := readInput(e, file)
	if err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, fmt.Errorf("read %s from %s: %w", kind, file, err)
	}
	return v, nil
}

func readInput(e env, name string) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if name == "-" {
		b, err = io.ReadAll(io.LimitReader(e.stdin, 1<<20))
	} else {
		b, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
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

// ---- plans ----

func plansCommands() []subcommand {
	return []subcommand{
		{"ls", "", "list plans", plansLs},
		{"get", "NAME", "show one plan", getCommand("plan", "NAME", printPlan)},
		{"put", "[-f FILE | --name N flags]", "create or update a plan (If-Match the current version)", plansPut},
		{"rm", "NAME", "delete a plan (fails while a rule uses it)", rmCommand("plan", "NAME")},
	}
}

func plansLs(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "plans ls", "", "List plans.")
	a := addAdminFlags(fs)
	_, c, err := a.connect(ctx, fs, args, 0)
	if err != nil {
		return err
	}
	var l admin.ListPlansResponse
	if _, err := c.getJSON(ctx, "/plans", nil, &l); err != nil {
		return fmt.Errorf("list plans: %w", err)
	}
	return a.print(e.stdout, l.Plans, func() { printPlans(e.stdout, l.Plans) })
}

func printPlans(w io.Writer, ps []rules.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tLIMIT\tBURST\tVERSION\tDESCRIPTION")
	for _, p := range ps {
		burst := p.Limit
		if p.Burst != nil {
			burst = *p.Burst
		}
		fmt.Fprintf(tw, "%s\t%d/%s\t%d\t%d\t%s\n", p.Name, p.Limit, p.Period, burst, p.Version, p.Description)
	}
	tw.Flush()
}

func printPlan(w io.Writer, p rules.Plan) { printPlans(w, []rules.Plan{p}) }

func plansPut(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "plans put", "", `Create or update a plan.

From a file: sluice plans put -f plan.json
From flags:  sluice plans put --name gold --limit 1000 --period 1m --burst 2000

An existing plan of that name is updated with If-Match (--version, or the
current version); on update only the flags given change it.`)
	a := addAdminFlags(fs)
	file := fs.String("f", "", "read the plan from this JSON file (- for stdin)")
	name := fs.String("name", "", "plan name")
	limit := fs.Int64("limit", 0, "tokens refilled per period (0 blocks)")
	period := fs.String("period", "", "refill period: 1s, 1m, 1h, 1d, 1w, 1y or a Go duration")
	burst := fs.Int64("burst", 0, "bucket capacity (default: limit)")
	description := fs.String("description", "", "free text")
	version := fs.Int64("version", 0, "If-Match this version (default: the current one)")
	if _, err := a.parse(fs, args, 0); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var in rules.Plan
	if *file != "" {
		p, err := readJSON[rules.Plan](e, "plan", *file)
		if err != nil {
			return err
		}
		in = p
	}
	if set["name"] {
		in.Name = *name
	}
	if set["version"] {
		in.Version = *version
	}
	if in.Name == "" {
		fs.Usage()
		return usageErrorf("plans put: --name (or name in the file) is required")
	}
	c, err := newAdminClient(ctx, a.client)
	if err != nil {
		return err
	}
	var cur *rules.Plan
	if p, err := fetch[rules.Plan](ctx, c, "plan", in.Name); err == nil {
		cur = &p
	} else if ae := (*apiError)(nil); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		return err
	}
	out := in
	if cur != nil && *file == "" {
		out = *cur
	}
	if set["limit"] {
		out.Limit = *limit
	}
	if set["period"] {
		p, err := rules.ParsePeriod(*period)
		if err != nil {
			return usageErrorf("--period %q: %v", *period, err)
		}
		out.Period = p
	}
	if set["burst"] {
		out.Burst = new(*burst)
	}
	if set["description"] {
		out.Description = *description
	}
	var got rules.Plan
	if cur == nil {
		out.Version = 0
		if err := c.sendJSON(ctx, http.MethodPost, "/plans", out, 0, &got); err != nil {
			return fmt.Errorf("create plan %s: %w", in.Name, err)
		}
		fmt.Fprintf(e.stderr, "created plan %s\n", got.Name)
	} else {
		ifMatch := cur.Version
		if in.Version > 0 {
			ifMatch = in.Version
		}
		if err := c.sendJSON(ctx, http.MethodPut, "/plans/"+url.PathEscape(in.Name), out, ifMatch, &got); err != nil {
			return fmt.Errorf("update plan %s (If-Match %d): %w", in.Name, ifMatch, err)
		}
		fmt.Fprintf(e.stderr, "updated plan %s to version %d\n", got.Name, got.Version)
	}
	return a.print(e.stdout, got, func() { printPlan(e.stdout, got) })
}

// ---- subjects ----

func subjectsCommands() []subcommand {
	return []subcommand{
		{"limits", "SUBJECT", "show the rules that apply to a subject and its remaining tokens", subjectsLimits},
		{"reset", "SUBJECT", "delete a subject's buckets (unblock it)", subjectsReset},
	}
}

func subjectQuery(api, route string) url.Values {
	q := url.Values{}
	if api != "" {
		q.Set("api", api)
	}
	if route != "" {
		q.Set("route", route)
	}
	return q
}

func subjectsLimits(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "subjects limits", "SUBJECT", "Show the rules that apply to a subject and its buckets' state.")
	a := addAdminFlags(fs)
	api := fs.String("api", "", "API id (default: every API)")
	route := fs.String("route", "", "route such as 'GET /items/{id}' (default: every route)")
	pos, c, err := a.connect(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	var l admin.SubjectLimitsResponse
	if _, err := c.getJSON(ctx, "/subjects/"+url.PathEscape(pos[0])+"/limits", subjectQuery(*api, *route), &l); err != nil {
		return fmt.Errorf("limits of subject %s: %w", pos[0], err)
	}
	return a.print(e.stdout, l, func() { printLimits(e.stdout, l.Limits) })
}

func printLimits(w io.Writer, ls []admin.BucketLimit) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tAPI\tROUTE\tSUBJECT\tLIMIT\tBURST\tCOST\tMODE\tFAIL\tREMAINING\tRESET")
	for _, l := range ls {
		limit := fmt.Sprintf("%d/%s", l.Limit, l.Period)
		if l.Plan != "" {
			limit += " (plan " + l.Plan + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", l.Rule, l.API, l.Route, l.Subject,
			limit, l.Burst, l.Cost, l.Mode, l.FailureMode, l.Remaining, time.Duration(l.ResetMs)*time.Millisecond)
	}
	tw.Flush()
}

func subjectsReset(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "subjects reset", "SUBJECT", "Delete a subject's buckets, giving it full buckets again.")
	a := addAdminFlags(fs)
	api := fs.String("api", "", "API id (default: every API)")
	pos, c, err := a.connect(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	// 204, no body.
	if _, err := c.do(ctx, http.MethodDelete, "/subjects/"+url.PathEscape(pos[0])+"/buckets", subjectQuery(*api, ""), nil, 0); err != nil {
		return fmt.Errorf("reset subject %s: %w", pos[0], err)
	}
	return a.print(e.stdout, map[string]any{"reset": pos[0]}, func() {
		fmt.Fprintf(e.stdout, "reset the buckets of subject %s\n", pos[0])
	})
}
