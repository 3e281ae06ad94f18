package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
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

func (cmd *plansLsCmd) Run(e *env, c *adminclient.Client) error {
	var l admin.ListPlansResponse
	if err := c.GetJSON(e.ctx, "/plans", nil, &l); err != nil {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t", p.Name, cmp.Or(p.Kind, rules.Rate), planLimit(p), planBurst(p), p.Version)
		if set {
			fmt.Fprintf(tw, "%s\t", cmp.Or(p.Set, "-"))
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

func (cmd *plansGetCmd) Run(e *env, c *adminclient.Client) error {
	return show(e, c, "plan", cmd.Name, func(w io.Writer, p rules.Plan) { printPlans(w, []rules.Plan{p}) })
}

type plansRmCmd struct {
	Name    string `arg:"" help:"The plan's name."`
	Version int64  `help:"If-Match this version (default: current)."`
}

func (cmd *plansRmCmd) Run(e *env, c *adminclient.Client) error {
	return remove(e, c, "plan", cmd.Name, cmd.Version)
}

type plansHistoryCmd struct {
	Name string `arg:"" help:"The plan's name."`
}

func (cmd *plansHistoryCmd) Run(e *env, c *adminclient.Client) error {
	return history(e, c, "plan", cmd.Name)
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
	in, err := readJSON[rules.Plan](e, "plan", cmd.File)
	if err != nil {
		return err
	}
	setFlag(&in.Name, cmd.Name)
	setFlag(&in.Version, cmd.Version)
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
	setFlag(&out.Limit, cmd.Limit)
	if err := setPeriod(&out.Period, cmd.Period); err != nil {
		return err
	}
	setFlagNew(&out.Burst, cmd.Burst)
	setFlag(&out.Kind, (*rules.Kind)(cmd.Kind))
	setFlag(&out.Description, cmd.Description)
	setFlag(&out.Global, cmd.Global)
	curVersion := int64(0)
	if cur != nil {
		curVersion = cur.Version
	} else {
		out.Version = 0
	}
	got, err := save(e, c, "plan", in.Name, out, curVersion, in.Version, cmd.File != "", func(p rules.Plan) (string, int64) { return p.Name, p.Version })
	if err != nil {
		return err
	}
	return e.print(got, func() { printPlans(e.stdout, []rules.Plan{got}) })
}
