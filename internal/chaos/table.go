package chaos

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// WriteTable writes the results as the Markdown table docs/RELIABILITY.md
// quotes: per fault, the decisions, fail-open (and fail-closed) ones, the
// most admitted beyond a limit against its bound for rate rules, quotas
// and durable quotas, the longest gap, the recovery and the rule change's
// propagation. The global scenarios get their own table (WriteGlobalTable)
// before it.
func WriteTable(w io.Writer, results []Result) {
	regional := slices.DeleteFunc(slices.Clone(results), func(r Result) bool { return r.Global != nil })
	if len(regional) < len(results) {
		WriteGlobalTable(w, results) // which skips the regional ones
		if len(regional) == 0 {
			return
		}
		fmt.Fprintln(w)
	}
	results = regional
	fmt.Fprintln(w, "| fault | decisions | fail-open | fail-closed | max excess admitted (measured / bound): rate · quota · durable quota | gap | recovery | rule change enforced | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %s · %s · %s | %s | %s | %s | %s |\n",
			r.Fault, r.Decisions, r.FailOpen, r.FailClosed, excess(r.Rate), excess(r.Quota), excess(r.Durable),
			ms(r.Gap), ms(r.Recovery), propagationText(r.Propagation), verdict(r))
	}
}

// verdict is the table's last cell: whether r held every bound.
func verdict(r Result) string {
	if len(r.Problems) > 0 {
		return fmt.Sprintf("**%d broken**", len(r.Problems))
	}
	return "held"
}

func excess(e Excess) string {
	if e.Checked == 0 {
		return "—"
	}
	// A negative excess is a subject that stayed under its quota: none
	// admitted beyond.
	return fmt.Sprintf("%d / %d", max(e.Max, 0), e.Bound)
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func propagationText(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return "≤ " + ms(d)
}
