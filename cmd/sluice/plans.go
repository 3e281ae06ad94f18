package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
)

func plansCommands() []subcommand {
	return []subcommand{
		{"ls", "", "list plans", plansLs},
		{"get", "NAME", "show one plan", getCommand("plan", "NAME", printPlan)},
		{"put", "[-f FILE | --name N flags]", "create or update a plan (If-Match the current version)", plansPut},
		{"rm", "NAME", "delete a plan (fails while a rule uses it)", rmCommand("plan", "NAME")},
		{"history", "NAME", "show a plan's audit log", plansHistory},
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
	kind := fs.String("kind", "", "rate (the default) or quota (a calendar window: --period 1d, 1w, 1mo or 1y)")
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
	if set["kind"] {
		out.Kind = rules.Kind(*kind)
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

func plansHistory(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "plans history", "NAME", "Show a plan's audit log, oldest first.")
	a := addAdminFlags(fs)
	pos, c, err := a.connect(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	var h admin.HistoryResponse
	if _, err := c.getJSON(ctx, "/plans/"+url.PathEscape(pos[0])+"/history", nil, &h); err != nil {
		return fmt.Errorf("plan history %s: %w", pos[0], err)
	}
	return printHistory(e.stdout, a.output, h.Entries)
}
