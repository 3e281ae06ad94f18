package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
)

func subjectsCommands() []subcommand {
	return []subcommand{
		{"limits", "SUBJECT", "show the rules that apply to a subject and its remaining tokens", subjectsLimits},
		{"reset", "SUBJECT", "delete a subject's buckets (unblock it)", subjectsReset},
	}
}

func subjectQuery(api, route, dimension string) url.Values {
	q := url.Values{}
	if api != "" {
		q.Set("api", api)
	}
	if route != "" {
		q.Set("route", route)
	}
	if dimension != "" {
		q.Set("dimension", dimension)
	}
	return q
}

const dimensionUsage = "the dimension whose rules the subject is looked up in (one of DIMENSIONS, such as ip for an IP's floor); default: the default one"

func subjectsLimits(ctx context.Context, e env, args []string) error {
	fs := newFlagSet(e, "subjects limits", "SUBJECT", "Show the rules that apply to a subject and its buckets' state.")
	a := addAdminFlags(fs)
	api := fs.String("api", "", "API id (default: every API)")
	route := fs.String("route", "", "route such as 'GET /items/{id}' (default: every route)")
	dim := fs.String("dimension", "", dimensionUsage)
	pos, c, err := a.connect(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	var l admin.SubjectLimitsResponse
	if _, err := c.getJSON(ctx, "/subjects/"+url.PathEscape(pos[0])+"/limits", subjectQuery(*api, *route, *dim), &l); err != nil {
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
		if l.Used != nil && l.ResetsAt != nil {
			limit = fmt.Sprintf("quota %s, used %d, resets %s", limit, *l.Used, l.ResetsAt.Format(time.RFC3339))
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
	dim := fs.String("dimension", "", dimensionUsage)
	pos, c, err := a.connect(ctx, fs, args, 1)
	if err != nil {
		return err
	}
	// 204, no body.
	if _, err := c.do(ctx, http.MethodDelete, "/subjects/"+url.PathEscape(pos[0])+"/buckets", subjectQuery(*api, "", *dim), nil, 0); err != nil {
		return fmt.Errorf("reset subject %s: %w", pos[0], err)
	}
	return a.print(e.stdout, map[string]any{"reset": pos[0]}, func() {
		fmt.Fprintf(e.stdout, "reset the buckets of subject %s\n", pos[0])
	})
}
