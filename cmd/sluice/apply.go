package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rulefile"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// exitChanges is `sluice diff`'s exit code when the file would change
// something, so that CI can gate on it: 0 no change, 1 error.
const exitChanges = 2

type applyCmd struct {
	adminFlags `embed:""`

	File string `short:"f" name:"file" placeholder:"FILE" xor:"source" required:"" help:"Rules file, YAML or JSON, up to 16 MiB (-: stdin)."`
	Plan string `name:"plan" placeholder:"FILE" xor:"source" required:"" help:"Apply a plan saved by diff --out; refused if it reaches outside its set or changed since."`
}

type diffCmd struct {
	adminFlags `embed:""`

	File string `short:"f" name:"file" placeholder:"FILE" required:"" help:"Rules file, YAML or JSON, up to 16 MiB (-: stdin)."`
	Out  string `name:"out" placeholder:"FILE" help:"Also save the plan here, for apply --plan."`
}

type exportCmd struct {
	adminFlags `embed:""`

	Set string `arg:"" name:"set" help:"The set to export."`
}

type lintCmd struct {
	Files []string `short:"f" name:"file" placeholder:"FILE" required:"" help:"Rules files (repeatable)."`
}

// savedPlan is a batch and, for people, its changes (rulefile.Changes of
// the batch). diff --out writes the batch alone, the body apply --plan
// sends to POST /batch: the set it targets and its ops.
type savedPlan struct {
	Batch   store.Batch
	Changes []rulefile.Change
}

// readRulesFile reads and parses a rules file ("-": stdin), refusing one
// over rulefile.MaxSize whole.
func readRulesFile(e *env, name string) (*rulefile.File, error) {
	if name == "-" {
		return rulefile.Read("stdin", e.stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read rules file: %w", err)
	}
	defer f.Close()
	return rulefile.Read(name, f)
}

// readPlan reads a plan diff --out saved, decoded as strictly as the
// admin API decodes it (httpapi.DecodeBody): at most admin.MaxBatchBody,
// no unknown, repeated or miscased key, nothing after it.
func readPlan(name string) (store.Batch, error) {
	f, err := os.Open(name)
	if err != nil {
		return store.Batch{}, fmt.Errorf("read the plan: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, admin.MaxBatchBody+1))
	if err != nil {
		return store.Batch{}, fmt.Errorf("read the plan %s: %w", name, err)
	}
	if len(b) > admin.MaxBatchBody {
		return store.Batch{}, fmt.Errorf("the plan %s is larger than %d MiB, the most POST /batch takes", name, admin.MaxBatchBody>>20)
	}
	var batch store.Batch
	problems, err := httpapi.DecodeBody(b, &batch)
	var he *httpapi.Error
	if errors.As(err, &he) {
		problems = he.Fields
		if problems == nil {
			detail := strings.Replace(he.Detail, "The request body", "It", 1)
			return store.Batch{}, fmt.Errorf("read the plan %s: %s (write it with sluice diff --out)", name, detail)
		}
	}
	if problems != nil {
		probs := make([]rulefile.Problem, len(problems))
		for i, p := range problems {
			probs[i] = rulefile.Problem{File: name, Field: p.Field, Reason: p.Reason}
		}
		return store.Batch{}, fmt.Errorf("read the plan (write it with sluice diff --out):\n%w", &rulefile.Error{Problems: probs})
	}
	return batch, nil
}

// current reads every rule and plan the admin API holds.
func current(e *env, c *adminclient.Client) (rules.Set, error) {
	var set rules.Set
	var err error
	if set.Rules, err = listRules(e, c, rules.Filter{}); err != nil {
		return set, err
	}
	var l admin.ListPlansResponse
	if err := c.GetJSON(e.ctx, "/plans", nil, &l); err != nil {
		return set, fmt.Errorf("list plans: %w", err)
	}
	set.Plans = l.Plans
	return set, nil
}

// plan parses file and diffs it against the admin API.
func plan(e *env, a *adminFlags, file string) (*adminclient.Client, savedPlan, error) {
	f, err := readRulesFile(e, file)
	if err != nil {
		return nil, savedPlan{}, err
	}
	c, err := a.connect(e)
	if err != nil {
		return nil, savedPlan{}, err
	}
	have, err := current(e, c)
	if err != nil {
		return nil, savedPlan{}, err
	}
	b, changes, err := rulefile.Diff(f, have)
	if err != nil {
		return nil, savedPlan{}, err
	}
	return c, savedPlan{Batch: b, Changes: changes}, nil
}

func printChanges(w io.Writer, p savedPlan) {
	n := map[string]int{}
	for _, c := range p.Changes {
		fmt.Fprintln(w, c)
		n[c.Action]++
	}
	fmt.Fprintf(w, "Set %q: %d to create, %d to update, %d to delete.\n", p.Batch.Set, n[rules.ActionCreate], n[rules.ActionUpdate], n[rules.ActionDelete])
}

func (cmd *diffCmd) Run(e *env, a *adminFlags) error {
	_, p, err := plan(e, a, cmd.File)
	if err != nil {
		return err
	}
	if cmd.Out != "" {
		b, err := json.MarshalIndent(p.Batch, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(cmd.Out, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("save the plan: %w", err)
		}
	}
	if err := e.print(p.Changes, func() { printChanges(e.stdout, p) }); err != nil {
		return err
	}
	if len(p.Batch.Ops) > 0 {
		return exitError{code: exitChanges}
	}
	return nil
}

func (cmd *applyCmd) Run(e *env, a *adminFlags) error {
	var (
		c   *adminclient.Client
		p   savedPlan
		err error
	)
	if cmd.Plan != "" {
		// What is shown is derived from what is sent, against what the
		// deployment holds now; a batch reaching outside its set is
		// refused before anything is sent.
		if p.Batch, err = readPlan(cmd.Plan); err != nil {
			return err
		}
		if c, err = a.connect(e); err != nil {
			return err
		}
		have, err := current(e, c)
		if err != nil {
			return err
		}
		// A plan run again: done is done, and a set changed since says
		// how, rather than a 409 on the first write that is there.
		if store.CheckBatch(p.Batch) == nil && len(p.Batch.Ops) > 0 {
			held, rest := rulefile.Progress(cmd.Plan, p.Batch, have)
			switch {
			case held == len(p.Batch.Ops):
				return e.print(appliedResult{Changes: []rulefile.Change{}, Results: []store.Result{}, AlreadyApplied: true}, func() {
					fmt.Fprintf(e.stdout, "The plan %s is already applied: set %q holds each of its %s. Nothing to do.\n",
						cmd.Plan, p.Batch.Set, plural(len(p.Batch.Ops), "write"))
				})
			case held > 0:
				return fmt.Errorf("the plan %s was applied (%d of its %s hold) and set %q changed since; nothing was sent:\n%w\nto bring the set back to its file, plan again: sluice diff -f FILE --out %s",
					cmd.Plan, held, plural(len(p.Batch.Ops), "write"), p.Batch.Set, &rulefile.Error{Problems: rest}, cmd.Plan)
			}
		}
		if p.Changes, err = rulefile.Changes(cmd.Plan, p.Batch, have); err != nil {
			return fmt.Errorf("refused the plan for set %q; nothing was applied:\n%w", p.Batch.Set, err)
		}
	} else if c, p, err = plan(e, a, cmd.File); err != nil {
		return err
	}
	var res admin.BatchResponse
	if len(p.Batch.Ops) > 0 {
		// A 412 or 409 says which op failed and that nothing was applied.
		if err := c.SendJSON(e.ctx, http.MethodPost, "/batch", p.Batch, 0, &res); err != nil {
			return fmt.Errorf("apply set %q: %w", p.Batch.Set, err)
		}
	}
	return e.print(appliedResult{Changes: p.Changes, Results: res.Results}, func() {
		printChanges(e.stdout, p)
		if len(p.Batch.Ops) > 0 {
			fmt.Fprintf(e.stdout, "Applied %d change(s) in one transaction.\n", len(p.Batch.Ops))
		}
	})
}

// appliedResult is apply's JSON output: the changes shown, each op's
// stored rule or plan, and whether a saved plan was applied already
// (then nothing was sent).
type appliedResult struct {
	Changes        []rulefile.Change `json:"changes"`
	Results        []store.Result    `json:"results"`
	AlreadyApplied bool              `json:"already_applied,omitempty"`
}

func (cmd *exportCmd) Run(e *env, c *adminclient.Client) error {
	have, err := current(e, c)
	if err != nil {
		return err
	}
	f := rulefile.Export(cmd.Set, have)
	if len(f.Rules) == 0 && len(f.Plans) == 0 {
		// An empty file would delete everything apply -f finds beside it.
		return fmt.Errorf("no rule or plan belongs to set %s (sets: %s)", cmd.Set, setNames(have))
	}
	if e.output == "json" {
		return printJSON(e.stdout, f)
	}
	b, err := rulefile.Marshal(f)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(b)
	return err
}

// setNames lists the sets that own a rule or a plan in have, or "none".
func setNames(have rules.Set) string {
	var names []string
	for _, r := range have.Rules {
		names = append(names, r.Set)
	}
	for _, p := range have.Plans {
		names = append(names, p.Set)
	}
	slices.Sort(names)
	names = slices.DeleteFunc(slices.Compact(names), func(n string) bool { return n == "" })
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func (cmd *lintCmd) Run(e *env) error {
	var errs []error
	nr, np, problems := 0, 0, 0
	for _, name := range cmd.Files {
		f, err := readRulesFile(e, name)
		if err != nil {
			errs = append(errs, err)
			var fe *rulefile.Error
			if problems++; errors.As(err, &fe) {
				problems += len(fe.Problems) - 1
			}
			continue
		}
		nr, np = nr+len(f.Rules), np+len(f.Plans)
		for _, w := range f.Warnings(time.Now()) {
			fmt.Fprintf(e.stderr, "sluice: lint: warning: %s\n", w)
		}
	}
	if err := errors.Join(errs...); err != nil {
		// The count on the command's line, each problem on its own.
		return exitError{code: exitFailure, msg: plural(problems, "problem") + ":\n" + err.Error()}
	}
	if e.output != "json" {
		fmt.Fprintf(e.stdout, "%s, %s and %s: no problems.\n", plural(len(cmd.Files), "file"), plural(nr, "rule"), plural(np, "plan"))
	}
	return nil
}

// plural is "1 problem", "2 problems".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
