package main

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
)

type statsCmd struct {
	adminFlags `embed:""`

	Window string `default:"5m" help:"How far back, whole minutes (at most 15m locally, 24h on AWS)."`
	Top    int    `default:"10" help:"How many rules and subjects (1 to 100)."`
}

func (cmd *statsCmd) Help() string {
	return `Shows the top limiting rules and the top denied subjects (as hashes) over the
last --window: from sluice local's in-process counts, or from the deployed
stack's Contributor Insights rules.`
}

// Run prints GET /stats: the top limiting rules and denied subjects.
func (cmd *statsCmd) Run(e *env, c *adminclient.Client) error {
	var rep stats.Report
	q := url.Values{"window": {cmd.Window}, "top": {strconv.Itoa(cmd.Top)}}
	if err := c.GetJSON(e.ctx, "/stats", q, &rep); err != nil {
		return nameFlags(err)
	}
	// The tables name each rule by its scope; -o json keeps the ids.
	names := map[string]string{}
	name := func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		n := id // the default rule, or one deleted since
		if r, err := fetch[rules.Rule](e, c, "rule", id); err == nil {
			n = r.Route + " " + r.Subject
		}
		names[id] = n
		return n
	}
	return e.print(rep, func() {
		fmt.Fprintf(e.stdout, "%s to %s (%s, %s)\n\nTOP LIMITING RULES\n", rep.From.Format("15:04:05"), rep.To.Format("15:04:05"), rep.Window, rep.Source)
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tAPI\tDENIED\tSHADOW-DENIED\tFAIL-OPEN\tALLOWED")
		for _, r := range rep.Rules {
			allowed := "-"
			if r.Allowed != nil {
				allowed = strconv.FormatInt(*r.Allowed, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", name(r.Rule), r.API, r.Denied, r.ShadowDenied, r.FailOpen, allowed)
		}
		tw.Flush()
		fmt.Fprintln(e.stdout, "\nTOP DENIED SUBJECTS (hash)")
		tw = tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		// AS SENT only when SUBJECT_SHOW showed one (an identity; a
		// credential never is).
		shown := slices.ContainsFunc(rep.Subjects, func(s stats.SubjectStat) bool { return s.Shown != "" })
		head, sent := "SUBJECT\tRULE\tAPI\tDENIED", ""
		if shown {
			head = "SUBJECT\tAS SENT\tRULE\tAPI\tDENIED"
		}
		fmt.Fprintln(tw, head)
		for _, s := range rep.Subjects {
			if shown {
				sent = cmp.Or(s.Shown, "-") + "\t"
			}
			fmt.Fprintf(tw, "%s\t%s%s\t%s\t%d\n", s.Subject, sent, name(s.Rule), s.API, s.Denied)
		}
		tw.Flush()
	})
}
