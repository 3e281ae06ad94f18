package rulefile

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// Change is one write of a plan, for people: what Diff prints.
type Change struct {
	// Action is rules.ActionCreate, ActionUpdate or ActionDelete.
	Action string `json:"action"`
	// Kind is rules.KindRule or rules.KindPlan.
	Kind string `json:"kind"`
	// Name is the plan's name, or the rule's scope (Key.String).
	Name string `json:"name"`
	// ID is the rule's id on update and delete.
	ID string `json:"id,omitempty"`
	// Fields are what an update changes, in the admin API's field order.
	Fields []FieldChange `json:"fields,omitempty"`
}

// FieldChange is one field of an update: its JSON name and values, as
// JSON (null: unset).
type FieldChange struct {
	Field string          `json:"field"`
	Old   json.RawMessage `json:"old"`
	New   json.RawMessage `json:"new"`
}

func (c Change) String() string {
	sign := map[string]string{rules.ActionCreate: "+", rules.ActionUpdate: "~", rules.ActionDelete: "-"}[c.Action]
	s := fmt.Sprintf("%s %s %s %s", sign, c.Action, c.Kind, c.Name)
	if c.ID != "" {
		s += " (" + c.ID + ")"
	}
	for _, f := range c.Fields {
		s += fmt.Sprintf("\n    %s: %s -> %s", f.Field, f.Old, f.New)
	}
	return s
}

// Diff plans the writes that converge the deployment's rules and plans
// (have: every rule and plan it holds, of any set) to f: creates for
// what only f has, updates (at the stored version) for what differs, and
// deletes for what only the set has. It never plans a write to a rule or
// plan outside f's set: one whose name or scope another set (or none)
// holds is a problem, named at its line in f.
//
// The batch orders the writes so each can land: plans created and
// updated first, then rules deleted, updated and created, then plans
// deleted. The changes are Changes of the batch: what is shown is derived
// from what is sent.
func Diff(f *File, have rules.Set) (store.Batch, []Change, error) {
	b := store.Batch{Set: f.Set}
	var probs []Problem
	h := index(have)

	var planCreates, planUpdates, planDeletes []store.Op
	want := map[string]bool{}
	for i, p := range f.Plans {
		want[p.Name] = true
		p.Set = "" // the batch's: the batch records its set once
		cur, ok := h.plans[p.Name]
		switch {
		case !ok:
			planCreates = append(planCreates, store.Op{Action: rules.ActionCreate, Plan: &p})
		case cur.Set != f.Set:
			probs = append(probs, Problem{f.name, f.planLines[i], fmt.Sprintf("plans[%d].name", i), fmt.Sprintf("plan %q exists and belongs to %s: an apply of set %q changes only its own", p.Name, owner(cur.Set), f.Set)})
		default:
			if fs := fieldChanges(cur, p, planFields); len(fs) > 0 {
				planUpdates = append(planUpdates, store.Op{Action: rules.ActionUpdate, Plan: &p, IfVersion: cur.Version})
			}
		}
	}
	for _, p := range have.Plans {
		if p.Set == f.Set && !want[p.Name] {
			planDeletes = append(planDeletes, store.Op{Action: rules.ActionDelete, Plan: &rules.Plan{Name: p.Name}, IfVersion: p.Version})
		}
	}

	var ruleCreates, ruleUpdates, ruleDeletes []store.Op
	wantKey := map[Key]bool{}
	for i, r := range f.Rules {
		r.Set = ""
		k := KeyOf(r)
		wantKey[k] = true
		cur, ok := h.byKey[k]
		switch {
		case !ok:
			ruleCreates = append(ruleCreates, store.Op{Action: rules.ActionCreate, Rule: &r})
		case cur.Set != f.Set:
			probs = append(probs, Problem{f.name, f.ruleLines[i], fmt.Sprintf("rules[%d]", i), fmt.Sprintf("rule %s holds this scope and belongs to %s: an apply of set %q changes only its own; delete or move that rule, or change this one's scope", cur.ID, owner(cur.Set), f.Set)})
		default:
			if fs := fieldChanges(cur, r, ruleFields); len(fs) > 0 {
				up := r
				up.ID = cur.ID
				ruleUpdates = append(ruleUpdates, store.Op{Action: rules.ActionUpdate, Rule: &up, IfVersion: cur.Version})
			}
		}
	}
	for _, r := range have.Rules {
		if k := KeyOf(r); r.Set == f.Set && !wantKey[k] {
			ruleDeletes = append(ruleDeletes, store.Op{Action: rules.ActionDelete, Rule: &rules.Rule{ID: r.ID}, IfVersion: r.Version})
		}
	}
	if probs != nil {
		return store.Batch{}, nil, &Error{Problems: probs}
	}
	b.Ops = slices.Concat(planCreates, planUpdates, ruleDeletes, ruleUpdates, ruleCreates, planDeletes)
	changes, err := Changes(f.name, b, have)
	if err != nil {
		return store.Batch{}, nil, err
	}
	return b, changes, nil
}

// Changes describes for people what the batch b does to a deployment
// holding have (every rule and plan, of any set): one Change per op, in
// order, an update's fields against the stored rule or plan it replaces.
// It is what diff prints and what apply --plan shows of the batch it
// sends, so that nothing is shown that is not sent.
//
// It refuses, as an *Error naming each op ("ops[3]") in file name, a
// batch that is malformed (store.CheckBatch), that carries a rule or plan
// of a set other than b.Set, or that updates or deletes a rule or plan
// that does not exist or belongs to another set (or none): a saved plan
// writes only the set it records.
func Changes(name string, b store.Batch, have rules.Set) ([]Change, error) {
	var probs []Problem
	add := func(field, reason string) { probs = append(probs, Problem{File: name, Field: field, Reason: reason}) }
	var ve *rules.ValidationError
	if err := store.CheckBatch(b); errors.As(err, &ve) {
		for _, fe := range ve.Fields {
			add(fe.Field, fe.Reason)
		}
		return nil, &Error{Problems: probs}
	} else if err != nil {
		return nil, err
	}
	h := index(have)
	// owned reports a problem unless the stored row exists and is b.Set's.
	owned := func(field, what string, ok bool, set string) bool {
		switch {
		case !ok:
			add(field, what+" does not exist; make the plan again (sluice diff --out)")
		case set != b.Set:
			add(field, fmt.Sprintf("%s belongs to %s: a plan for set %q changes only its own", what, owner(set), b.Set))
		default:
			return true
		}
		return false
	}
	changes := make([]Change, 0, len(b.Ops))
	for i, op := range b.Ops {
		field := fmt.Sprintf("ops[%d]", i)
		c := Change{Action: op.Action}
		if op.Rule != nil {
			r := *op.Rule
			c.Kind, c.Name = rules.KindRule, KeyOf(r).String()
			if r.Set != "" && r.Set != b.Set {
				add(field+".rule.set", fmt.Sprintf("is %q: a plan for set %q writes only its own", r.Set, b.Set))
				continue
			}
			if op.Action == rules.ActionCreate {
				changes = append(changes, c)
				continue
			}
			cur, ok := h.byID[r.ID]
			if !owned(field, fmt.Sprintf("rule %q", r.ID), ok, cur.Set) {
				continue
			}
			c.ID = cur.ID
			if op.Action == rules.ActionDelete {
				c.Name = KeyOf(cur).String()
			} else {
				r.Set = b.Set
				c.Fields = fieldChanges(cur, r, ruleFields)
			}
		} else {
			p := *op.Plan
			c.Kind, c.Name = rules.KindPlan, fmt.Sprintf("%q", p.Name)
			if p.Set != "" && p.Set != b.Set {
				add(field+".plan.set", fmt.Sprintf("is %q: a plan for set %q writes only its own", p.Set, b.Set))
				continue
			}
			if op.Action != rules.ActionCreate {
				cur, ok := h.plans[p.Name]
				if !owned(field, fmt.Sprintf("plan %q", p.Name), ok, cur.Set) {
					continue
				}
				if op.Action == rules.ActionUpdate {
					p.Set = b.Set
					c.Fields = fieldChanges(cur, p, planFields)
				}
			}
		}
		changes = append(changes, c)
	}
	if probs != nil {
		return nil, &Error{Problems: probs}
	}
	return changes, nil
}

// holdings are what a deployment holds (a rules.Set), looked up: its rules
// by id and by scope, its plans by name.
type holdings struct {
	byID  map[string]rules.Rule
	byKey map[Key]rules.Rule
	plans map[string]rules.Plan
}

func index(have rules.Set) holdings {
	h := holdings{map[string]rules.Rule{}, map[Key]rules.Rule{}, map[string]rules.Plan{}}
	for _, r := range have.Rules {
		h.byKey[KeyOf(r)], h.byID[r.ID] = r, r
	}
	for _, p := range have.Plans {
		h.plans[p.Name] = p
	}
	return h
}

func owner(set string) string {
	if set == "" {
		return "no set"
	}
	return fmt.Sprintf("set %q", set)
}

// fieldChanges lists the fields, in order, whose JSON differs between
// the stored value have and the file's want, ignoring the server's
// fields. Both are normalised first, so an omitted default equals it.
func fieldChanges[T any, P interface {
	*T
	Normalize()
}](have, want T, order []string) []FieldChange {
	P(&have).Normalize()
	P(&want).Normalize()
	hm, wm := fieldMap(have), fieldMap(want)
	var out []FieldChange
	for _, k := range order {
		if _, server := serverFields[k]; server {
			continue
		}
		h, w := hm[k], wm[k]
		if !reflect.DeepEqual(decodeAny(h), decodeAny(w)) {
			out = append(out, FieldChange{Field: k, Old: orZero(h, w), New: orZero(w, h)})
		}
	}
	return out
}

// orZero is raw, or when it is absent the zero of the other side's type:
// false for a boolean left out (durable, global), else null.
func orZero(raw, other json.RawMessage) json.RawMessage {
	if raw != nil {
		return raw
	}
	if _, isBool := decodeAny(other).(bool); isBool {
		return json.RawMessage("false")
	}
	return json.RawMessage("null")
}

func fieldMap(v any) map[string]json.RawMessage {
	b, _ := json.Marshal(v) // rules and plans always marshal
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return m
}

func decodeAny(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}

// Export is the file of set from what the deployment holds: its plans by
// name and its rules by scope.
func Export(set string, have rules.Set) *File {
	f := &File{Version: Version, Set: set}
	for _, p := range have.Plans {
		if p.Set == set {
			f.Plans = append(f.Plans, p)
		}
	}
	for _, r := range have.Rules {
		if r.Set == set {
			f.Rules = append(f.Rules, r)
		}
	}
	slices.SortFunc(f.Plans, func(a, b rules.Plan) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(f.Rules, func(a, b rules.Rule) int {
		ka, kb := KeyOf(a), KeyOf(b)
		return cmp.Or(strings.Compare(ka.API, kb.API), strings.Compare(ka.Route, kb.Route), strings.Compare(ka.Subject, kb.Subject),
			strings.Compare(string(ka.Kind), string(kb.Kind)), strings.Compare(ka.Dimension, kb.Dimension))
	})
	return f
}

// Progress compares a saved batch b with what the deployment holds now
// (have, every rule and plan), op by op, for a plan that may have been
// applied already. It returns how many ops already hold: a create's rule
// (by scope) or plan (by name) exists in b.Set with the fields written,
// an update's holds them at any version, a delete's is gone. For every
// other op it returns a Problem ("ops[2]") saying what the deployment
// holds instead. All held: the plan was applied and nothing changed
// since. None held: the plan is still to apply (or stale: the admin API
// refuses it then). Some: it was applied, or partly, and changed since.
// b must pass store.CheckBatch.
func Progress(name string, b store.Batch, have rules.Set) (held int, rest []Problem) {
	h := index(have)
	for i, op := range b.Ops {
		var why string
		if op.Rule != nil {
			want := *op.Rule
			want.Set = b.Set
			cur, ok := h.byID[want.ID]
			if op.Action == rules.ActionCreate {
				cur, ok = h.byKey[KeyOf(want)]
			}
			why = progress(op, ok, cur.Set, cur.Version, b.Set, "rule "+cur.ID, func() []FieldChange { return fieldChanges(cur, want, ruleFields) })
		} else {
			want := *op.Plan
			want.Set = b.Set
			cur, ok := h.plans[want.Name]
			why = progress(op, ok, cur.Set, cur.Version, b.Set, fmt.Sprintf("plan %q", cur.Name), func() []FieldChange { return fieldChanges(cur, want, planFields) })
		}
		if why == "" {
			held++
			continue
		}
		rest = append(rest, Problem{File: name, Field: fmt.Sprintf("ops[%d]", i), Reason: op.Describe() + ": " + why})
	}
	return held, rest
}

// progress is "" when op's write holds on the stored row (ok: it exists,
// in set, at version), else what holds instead; what names the row and
// diff lists its fields against the op's.
func progress(op store.Op, ok bool, set string, version int64, batchSet, what string, diff func() []FieldChange) string {
	switch {
	case op.Action == rules.ActionDelete && !ok:
		return ""
	case op.Action == rules.ActionDelete && version == op.IfVersion:
		return "not deleted yet"
	case op.Action == rules.ActionDelete:
		return fmt.Sprintf("%s changed since (version %d, the plan deletes version %d)", what, version, op.IfVersion)
	case !ok && op.Action == rules.ActionCreate:
		return "not created yet"
	case !ok:
		return what + " was deleted since"
	case set != batchSet:
		return fmt.Sprintf("%s holds it and belongs to %s", what, owner(set))
	}
	fs := diff()
	if len(fs) == 0 {
		return ""
	}
	if op.Action == rules.ActionUpdate && version == op.IfVersion {
		return "not updated yet"
	}
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%s is %s, the plan writes %s", f.Field, f.Old, f.New)
	}
	return fmt.Sprintf("%s (version %d) differs: %s", what, version, strings.Join(parts, "; "))
}
