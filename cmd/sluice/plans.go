package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"text/tabwriter"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
)

type plansCmd struct {
	adminFlags `embed:""`

	Ls      plansLsCmd      `cmd:"" help:"List plans."`
	Get     plansGetCmd     `cmd:"" help:"Show one plan."`
	Put     plansPutCmd     `cmd:"" help:"Create or update a plan."`
	Rm      plansRmCmd      `cmd:"" help:"Delete a plan no rule uses."`
	History plansHistoryCmd `cmd:"" help:"Show a plan's audit log."`
}

type plansLsCmd struct{}

func (cmd *plansLsCmd) Run(e *env, a *adminFlags) error {
	c, err := a.connect(e)
	if err != nil {
		return err
	}
	var l admin.ListPlansResponse
	if _, err := c.GetJSON(e.ctx, "/plans", nil, &l); err != nil {
		return fmt.Errorf("list plans: %w", err)
	}
	return e.print(l.Plans, func() { printPlans(e.stdout, l.Plans) })
}

func printPlans(w io.Writer, ps []rules.Plan) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// SET only when a plan has one, as rules ls does.
	set := slices.ContainsFunc(ps, func(p rules.Plan) bool { return p.Set != "" })
	head := "NAME\tKIND\tLIMIT\tBURST\tVERSION"
	if set {
		head += "\tSET"
	}
	fmt.Fprintln(tw, head+"\tDESCRIPTION")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t", p.Name, orDefault(string(p.Kind), string(rules.Rate)), planLimit(p), planBurst(p), p.Version)
		if set {
			fmt.Fprintf(tw, "%s\t", orDefault(p.Set, "-"))
		}
		fmt.Fprintln(tw, p.Description)
	}
	tw.Flush()
}

// planLimit is the LIMIT cell: "1000/1m", or "global 1000/1m" for a global
// plan.
func planLimit(p rules.Plan) string {
	l := fmt.Sprintf("%d/%s", p.Limit, p.Period)
	if p.Kind == rules.Concurrency {
		l = fmt.Sprintf("%d in flight, ttl %s", p.Limit, p.Period)
	}
	if p.Global {
		return "global " + l
	}
	return l
}

// planBurst is a rate plan's bucket capacity; a quota has none (its
// window holds exactly the limit).
func planBurst(p rules.Plan) string {
	switch {
	case p.Kind == rules.Quota || p.Kind == rules.Concurrency:
		return "-"
	case p.Burst != nil:
		return fmt.Sprint(*p.Burst)
	}
	return fmt.Sprint(p.Limit)
}

type plansGetCmd struct {
	Name string `arg:"" help:"The plan's name."`
}

func (cmd *plansGetCmd) Run(e *env, a *adminFlags) error {
	c, err := a.connect(e)
	if err != nil {
		return err
	}
	p, err := fetch[rules.Plan](e, c, "plan", cmd.Name)
	if err != nil {
		return err
	}
	return e.print(p, func() { printPlans(e.stdout, []rules.Plan{p}) })
}

type plansRmCmd struct {
	Name    string `arg:"" help:"The plan's name."`
	Version int64  `help:"If-Match this version (default: current)."`
}

func (cmd *plansRmCmd) Run(e *env, a *adminFlags) error {
	return remove(e, a, "plan", cmd.Name, cmd.Version)
}

type plansHistoryCmd struct {
	Name string `arg:"" help:"The plan's name."`
}

func (cmd *plansHistoryCmd) Run(e *env, a *adminFlags) error {
	c, err := a.connect(e)
	if err != nil {
		return err
	}
	var h admin.HistoryResponse
	if _, err := c.GetJSON(e.ctx, "/plans/"+url.PathEscape(cmd.Name)+"/history", nil, &h); err != nil {
		return fmt.Errorf("plan history %s: %w", cmd.Name, err)
	}
	return printHistory(e, h.Entries)
}

// plansPutCmd: a nil field was not given; on update only the flags given
// change the plan.
type plansPutCmd struct {
	File        string  `short:"f" name:"file" placeholder:"FILE" help:"The plan as JSON (-: stdin)."`
	Name        *string `help:"Plan name."`
	Limit       *int64  `help:"Tokens per period (0 blocks)."`
	Period      *string `help:"Refill period: 1s, 1m, 1h, 1d, 1w, 1y or a Go duration."`
	Burst       *int64  `help:"Bucket capacity (default: limit)."`
	Kind        *string `help:"rate (default), quota (--period 1d, 1w, 1mo, 1y) or concurrency (--period is the slot TTL)."`
	Description *string `help:"Free text."`
	Global      *bool   `help:"Its rules share one budget across Regions."`
	Version     *int64  `help:"If-Match this version (default: current)."`
}

func (cmd *plansPutCmd) Help() string {
	return `From a file, from flags:

  sluice plans put -f plan.json
  sluice plans put --name gold --limit 1000 --period 1m --burst 2000

An existing plan of that name is updated with If-Match (--version, or the
current version); on update only the flags given change it.`
}

func (cmd *plansPutCmd) Run(e *env, a *adminFlags) error {
	var in rules.Plan
	if cmd.File != "" {
		p, err := readJSON[rules.Plan](e, "plan", cmd.File)
		if err != nil {
			return err
		}
		in = p
	}
	if cmd.Name != nil {
		in.Name = *cmd.Name
	}
	if cmd.Version != nil {
		in.Version = *cmd.Version
	}
	if in.Name == "" {
		return usageErrorf("--name (or name in the file) is required")
	}
	c, err := a.connect(e)
	if err != nil {
		return err
	}
	var cur *rules.Plan
	if p, err := fetch[rules.Plan](e, c, "plan", in.Name); err == nil {
		cur = &p
	} else if !isNotFound(err) {
		return err
	}
	if cur != nil {
		warnOwned(e, "plans put", "plan", cur.Name, cur.Set)
	}
	out := in
	if cur != nil && cmd.File == "" {
		out = *cur
	}
	if cmd.Limit != nil {
		out.Limit = *cmd.Limit
	}
	if cmd.Period != nil {
		p, err := rules.ParsePeriod(*cmd.Period)
		if err != nil {
			return usageErrorf("--period %q: %v", *cmd.Period, err)
		}
		out.Period = p
	}
	if cmd.Burst != nil {
		out.Burst = new(*cmd.Burst)
	}
	if cmd.Kind != nil {
		out.Kind = rules.Kind(*cmd.Kind)
	}
	if cmd.Description != nil {
		out.Description = *cmd.Description
	}
	if cmd.Global != nil {
		out.Global = *cmd.Global
	}
	named := func(err error) error {
		if cmd.File != "" {
			return err
		}
		return nameFlags(err)
	}
	var got rules.Plan
	if cur == nil {
		out.Version = 0
		if err := c.SendJSON(e.ctx, http.MethodPost, "/plans", out, 0, &got); err != nil {
			return fmt.Errorf("create plan %s: %w", in.Name, named(err))
		}
		fmt.Fprintf(e.stderr, "created plan %s\n", got.Name)
	} else {
		ifMatch := cur.Version
		if in.Version > 0 {
			ifMatch = in.Version
		}
		if err := c.SendJSON(e.ctx, http.MethodPut, "/plans/"+url.PathEscape(in.Name), out, ifMatch, &got); err != nil {
			return fmt.Errorf("update plan %s (If-Match %d): %w", in.Name, ifMatch, named(err))
		}
		fmt.Fprintln(e.stderr, updatedLine("plan", got.Name, ifMatch, got.Version))
	}
	return e.print(got, func() { printPlans(e.stdout, []rules.Plan{got}) })
}
