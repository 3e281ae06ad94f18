// Package rulefile is the rules-as-code file format of `sluice apply`,
// `diff`, `export` and `lint`: a versioned YAML (or JSON) document that
// holds one set's plans and rules, its parser, which names every problem
// by file, line and field, and the diff that turns a file and the rules a
// deployment holds into the store.Batch that converges them.
//
// A file looks like
//
//	version: 1
//	set: platform
//	plans:
//	  - name: gold
//	    limit: 1000
//	    period: 1m
//	rules:
//	  - api: a1b2c3d4e5
//	    route: "*"
//	    subject: "*"
//	    plan: gold
//
// Plans and rules carry the admin API's fields, spelled as its JSON
// spells them, less those the server assigns (id, version, created_at,
// updated_at) and set, which the file gives once. A rule is known by its
// scope (api, route, subject, kind, dimension), a plan by its name.
package rulefile

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/rules"
)

// Version is the file format's version, the file's "version".
const Version = 1

// MaxSize bounds a file: 16 MiB, room for 10,000 rules and plans with
// long descriptions. A larger file is refused whole, never cut: cut, it
// would apply as a set without the rules past the cut.
const MaxSize = 16 << 20

// Read reads a file named name (for problems) from r and parses it
// (Parse). More than MaxSize bytes is an error naming the file.
func Read(name string, r io.Reader) (*File, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return Parse(name, b)
}

// File is one set's plans and rules, as a file declares them.
type File struct {
	// Version is the format's version: Version.
	Version int `json:"version"`
	// Set names the set the file owns: every plan and rule of it, and no
	// other.
	Set string `json:"set"`
	// Plans and Rules are the set's, in file order; normalised.
	Plans []rules.Plan `json:"plans"`
	Rules []rules.Rule `json:"rules"`

	name       string // the file's name, for problems
	planLines  []int  // the line of each plan, and of each rule
	ruleLines  []int
	ruleFields []map[string]int  // each rule's field lines, by JSON name
	ruleFailed []map[string]bool // each rule's fields that did not decode
}

// Problem is one thing wrong with a file: where, which field, and why.
type Problem struct {
	// File is the file's name as given to Parse; Line counts from 1 (0:
	// the whole file).
	File string `json:"file"`
	Line int    `json:"line"`
	// Field is a path such as "rules[3].limit"; empty for the file.
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	s := p.File
	if p.Line > 0 {
		s += ":" + strconv.Itoa(p.Line)
	}
	if p.Field != "" {
		s += ": " + p.Field
	}
	return s + ": " + p.Reason
}

// Error lists every problem found in a file.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Warnings returns what f declares that is valid but likely a mistake: a
// rule whose expires_at is not after now, which never applies (apply
// writes it all the same).
func (f *File) Warnings(now time.Time) []Problem {
	var out []Problem
	for i, r := range f.Rules {
		if r.ExpiresAt == nil || r.ExpiresAt.After(now) {
			continue
		}
		out = append(out, Problem{File: f.name, Line: lineOf(f.ruleFields[i], "expires_at", f.ruleLines[i]), Field: fmt.Sprintf("rules[%d].expires_at", i),
			Reason: r.ExpiresAt.UTC().Format(time.RFC3339) + " is past: the rule never applies"})
	}
	return out
}

// serverFields are a rule's or plan's fields a file leaves out.
var serverFields = map[string]string{
	"id":         "is assigned by the server; leave it out (a rule is known by its scope)",
	"version":    "is the server's; leave it out (apply sends If-Match itself)",
	"created_at": "is the server's; leave it out",
	"updated_at": "is the server's; leave it out",
	"set":        "is the file's: give it once, at the top (set: NAME)",
}

// jsonFields lists the JSON names of t's fields, in order.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

var (
	ruleFields = jsonFields(reflect.TypeFor[rules.Rule]())
	planFields = jsonFields(reflect.TypeFor[rules.Plan]())
)

// Parse reads a file named name (for problems) holding YAML or JSON,
// checks its shape and validates every plan and rule as the admin API
// does (rules.Rule.Validate, rules.Plan.Validate, and a rule naming a
// plan of the file against its numbers), and finds two plans of one name
// or two rules of one scope. A key given twice in one mapping is a
// problem, as is a file over MaxSize. Every problem is reported, as an
// *Error.
func Parse(name string, data []byte) (*File, error) {
	f := &File{name: name}
	var probs []Problem
	add := func(line int, field, reason string) {
		probs = append(probs, Problem{File: name, Line: line, Field: field, Reason: reason})
	}
	if len(data) > MaxSize {
		add(0, "", fmt.Sprintf("is larger than %d MiB, the most a rules file may hold; split the set in two", MaxSize>>20))
		return nil, &Error{Problems: probs}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &Error{Problems: yamlProblems(name, err)}
	}
	if len(root.Content) == 0 {
		add(0, "", "is empty; want version: 1, set: NAME, plans: and rules:")
		return nil, &Error{Problems: probs}
	}
	doc := root.Content[0]
	if doc.Kind != yaml.MappingNode {
		add(doc.Line, "", "must be a mapping with version, set, plans and rules")
		return nil, &Error{Problems: probs}
	}
	var plans, rs *yaml.Node
	sawVersion := false
	seen := map[string]int{} // key → its line
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if first, dup := seen[k.Value]; dup {
			add(k.Line, k.Value, twice(first))
			continue
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "version":
			sawVersion = true
			if v.Kind != yaml.ScalarNode || v.Value != strconv.Itoa(Version) {
				add(v.Line, "version", fmt.Sprintf("must be %d: the only format this sluice reads", Version))
			}
			f.Version = Version
		case "set":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
				add(v.Line, "set", "must be a name such as platform")
				continue
			}
			f.Set = strings.TrimSpace(v.Value)
			if err := (rules.Rule{Set: f.Set}).Validate(); err != nil {
				if r := fieldReason(err, "set"); r != "" {
					add(v.Line, "set", r)
				}
			}
		case "plans":
			plans = v
		case "rules":
			rs = v
		default:
			add(k.Line, k.Value, "unknown key; a file has version, set, plans and rules")
		}
	}
	if !sawVersion {
		add(doc.Line, "version", fmt.Sprintf("is required: version: %d", Version))
	}
	if f.Set == "" && !slices.ContainsFunc(probs, func(p Problem) bool { return p.Field == "set" }) {
		add(doc.Line, "set", "is required: the name of the set this file owns, such as set: platform")
	}
	for _, sec := range []struct {
		key   string
		node  *yaml.Node
		known []string // its items' fields
	}{{"plans", plans, planFields}, {"rules", rs, ruleFields}} {
		if sec.node == nil || sec.node.Tag == "!!null" {
			continue
		}
		if sec.node.Kind != yaml.SequenceNode {
			add(sec.node.Line, sec.key, "must be a list (- ...)")
			continue
		}
		for i, item := range sec.node.Content {
			path := fmt.Sprintf("%s[%d]", sec.key, i)
			if item.Kind != yaml.MappingNode {
				add(item.Line, path, "must be a mapping of fields")
				continue
			}
			lines, known := checkKeys(item, path, sec.known, add)
			if sec.key == "plans" {
				var p rules.Plan
				failed := decode(known, &p, path, add)
				if validatable(failed) {
					p.Normalize()
					reportValidation(p.Validate(), path, item.Line, lines, failed, add)
				}
				f.Plans = append(f.Plans, p)
				f.planLines = append(f.planLines, item.Line)
			} else {
				var r rules.Rule
				failed := decode(known, &r, path, add)
				if validatable(failed) {
					r.Normalize()
					reportValidation(r.Validate(), path, item.Line, lines, failed, add)
				}
				f.Rules = append(f.Rules, r)
				f.ruleFailed = append(f.ruleFailed, failed)
				f.ruleLines = append(f.ruleLines, item.Line)
				f.ruleFields = append(f.ruleFields, lines)
			}
		}
	}
	probs = append(probs, f.crossCheck()...)
	if probs != nil {
		// In file order, as an editor lists them; a line's own in the
		// order found.
		slices.SortStableFunc(probs, func(a, b Problem) int { return cmp.Compare(a.Line, b.Line) })
		return nil, &Error{Problems: probs}
	}
	for i := range f.Plans {
		f.Plans[i].Set = f.Set
	}
	for i := range f.Rules {
		f.Rules[i].Set = f.Set
	}
	return f, nil
}

// crossCheck finds two plans of one name, two rules of one scope, and a
// rule that does not fit a plan of the file.
func (f *File) crossCheck() []Problem {
	var probs []Problem
	plans := map[string]int{}
	for i, p := range f.Plans {
		if p.Name == "" {
			continue
		}
		if j, dup := plans[p.Name]; dup {
			probs = append(probs, Problem{f.name, f.planLines[i], fmt.Sprintf("plans[%d].name", i),
				fmt.Sprintf("plan %q is already declared at line %d", p.Name, f.planLines[j])})
			continue
		}
		plans[p.Name] = i
	}
	scopes := map[Key]int{}
	for i, r := range f.Rules {
		// A scope field that did not decode is reported on its own; the
		// scope is unknown, so it is no duplicate of anything.
		if r.API == "" || slices.ContainsFunc(scopeFields, func(k string) bool { return f.ruleFailed[i][k] }) {
			continue
		}
		k := KeyOf(r)
		if j, dup := scopes[k]; dup {
			probs = append(probs, Problem{f.name, f.ruleLines[i], fmt.Sprintf("rules[%d]", i),
				fmt.Sprintf("the scope (api, route, subject, kind, dimension) of the rule at line %d: one rule per scope", f.ruleLines[j])})
			continue
		}
		scopes[k] = i
		if j, ok := plans[r.Plan]; ok && r.Plan != "" && len(f.ruleFailed[i]) == 0 && f.Plans[j].Validate() == nil && r.Validate() == nil {
			reportValidation(r.ValidateWithPlan(f.Plans[j]), fmt.Sprintf("rules[%d]", i), f.ruleLines[i], f.ruleFields[i], nil,
				func(line int, field, reason string) { probs = append(probs, Problem{f.name, line, field, reason}) })
		}
	}
	return probs
}

// scopeFields are the JSON names of a rule's scope (Key).
var scopeFields = []string{"api", "route", "subject", "kind", "dimension"}

// twice is the problem of a key given again after line first.
func twice(first int) string {
	return fmt.Sprintf("is given twice (first at line %d); give each key once", first)
}

// Key is a rule's scope: what a file knows it by.
type Key struct {
	API, Route, Subject string
	Kind                rules.Kind
	Dimension           string
}

// KeyOf returns the scope of r, normalised.
func KeyOf(r rules.Rule) Key {
	r.Normalize()
	return Key{r.API, r.Route, r.Subject, r.Kind, r.Dimension}
}

func (k Key) String() string {
	s := fmt.Sprintf("api %q route %q subject %q", k.API, k.Route, k.Subject)
	if k.Kind == rules.Quota {
		s += " quota"
	}
	if k.Dimension != "" {
		s += fmt.Sprintf(" dimension %q", k.Dimension)
	}
	return s
}

// checkKeys checks a plan's or rule's keys against the fields known and
// returns the line of each and the mapping without the keys it refused,
// so that the rest is still checked.
func checkKeys(m *yaml.Node, path string, known []string, add func(int, string, string)) (map[string]int, *yaml.Node) {
	lines := map[string]int{}
	out := *m
	out.Content = nil
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if first, dup := lines[k.Value]; dup {
			add(k.Line, path+"."+k.Value, twice(first))
			continue
		}
		lines[k.Value] = k.Line
		if why, server := serverFields[k.Value]; server {
			add(k.Line, path+"."+k.Value, why)
			continue
		}
		if !slices.Contains(known, k.Value) {
			reason := "unknown field"
			if near := nearest(k.Value, known); near != "" {
				reason += fmt.Sprintf("; did you mean %q?", near)
			}
			add(k.Line, path+"."+k.Value, reason)
			continue
		}
		out.Content = append(out.Content, k, m.Content[i+1])
	}
	return lines, &out
}

// decode decodes the mapping m into v through JSON, as the admin API
// reads a body, one field at a time so that a problem in one leaves the
// others decoded: a value of the wrong type, or that its type's own
// decoder (a period, a time) refuses, is a problem on its field. It
// returns the fields that did not decode.
func decode(m *yaml.Node, v any, path string, add func(int, string, string)) map[string]bool {
	failed := map[string]bool{}
	var raw map[string]any
	if err := m.Decode(&raw); err != nil {
		add(m.Line, path, err.Error())
		for i := 0; i+1 < len(m.Content); i += 2 {
			failed[m.Content[i].Value] = true
		}
		return failed
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i].Value
		one, err := json.Marshal(map[string]any{k: raw[k]})
		if err == nil {
			err = json.Unmarshal(one, v)
		}
		if err == nil {
			continue
		}
		failed[k] = true
		var te *json.UnmarshalTypeError
		var pe *time.ParseError
		if errors.As(err, &pe) {
			add(m.Content[i].Line, path+"."+k, fmt.Sprintf("must be an RFC 3339 time such as 2026-12-31T23:00:00Z, not %q", pe.Value))
		} else if errors.As(err, &te) {
			add(m.Content[i].Line, path+"."+k, fmt.Sprintf("must be %s, not a %s", jsonKind(te.Type), te.Value))
		} else {
			add(m.Content[i].Line, path+"."+k, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return failed
}

func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	}
	return "a " + t.String()
}

// validatable reports whether a plan or rule whose fields failed did not
// decode is still worth validating: not when its kind or plan failed,
// which decide what the other fields may be.
func validatable(failed map[string]bool) bool {
	return !failed["kind"] && !failed["plan"]
}

// reportValidation turns a *rules.ValidationError into problems on path's
// fields, each at its key's line, leaving out the fields that failed to
// decode and the reasons that name one (reported already; their zero
// value is not what the file says).
func reportValidation(err error, path string, line int, lines map[string]int, failed map[string]bool, add func(int, string, string)) {
	var ve *rules.ValidationError
	if !errors.As(err, &ve) {
		return
	}
	for _, fe := range ve.Fields {
		if failed[fe.Field] || slices.ContainsFunc(strings.Fields(fe.Reason), func(w string) bool { return failed[strings.Trim(w, ",.:;()")] }) {
			continue
		}
		add(lineOf(lines, fe.Field, line), path+"."+fe.Field, fe.Reason)
	}
}

func lineOf(lines map[string]int, field string, fallback int) int {
	if l, ok := lines[field]; ok {
		return l
	}
	return fallback
}

func fieldReason(err error, field string) string {
	var ve *rules.ValidationError
	if errors.As(err, &ve) {
		for _, fe := range ve.Fields {
			if fe.Field == field {
				return fe.Reason
			}
		}
	}
	return ""
}

// yamlLine finds "line N: reason" in a YAML error.
var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// yamlProblems turns a YAML syntax or shape error into problems.
func yamlProblems(name string, err error) []Problem {
	var out []Problem
	for _, l := range strings.Split(err.Error(), "\n") {
		if m := yamlLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, Problem{File: name, Line: n, Reason: m[2]})
		}
	}
	if out == nil {
		out = append(out, Problem{File: name, Reason: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
	return out
}

// nearest returns the name of known closest to s (edit distance at most
// 2), or "".
func nearest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Marshal writes f as YAML: plans by name, then rules by scope, each
// field in the admin API's order, defaults (kind rate, mode enforce,
// failure_mode open, enabled true) left out. Parse reads it back to the
// same plans and rules.
func Marshal(f *File) ([]byte, error) {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	addKV := func(m *yaml.Node, k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	addKV(doc, "version", &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(Version), Tag: "!!int"})
	addKV(doc, "set", &yaml.Node{Kind: yaml.ScalarNode, Value: f.Set, Tag: "!!str"})
	plans := &yaml.Node{Kind: yaml.SequenceNode}
	for _, p := range f.Plans {
		p.Normalize()
		n, err := fieldsNode(p, planFields, map[string]string{"kind": string(rules.Rate)})
		if err != nil {
			return nil, err
		}
		plans.Content = append(plans.Content, n)
	}
	rs := &yaml.Node{Kind: yaml.SequenceNode}
	for _, r := range f.Rules {
		r.Normalize()
		n, err := fieldsNode(r, ruleFields, map[string]string{"kind": string(rules.Rate), "mode": string(rules.Enforce),
			"failure_mode": string(rules.FailOpen), "enabled": "true"})
		if err != nil {
			return nil, err
		}
		rs.Content = append(rs.Content, n)
	}
	if len(plans.Content) == 0 {
		plans.Style = yaml.FlowStyle
	}
	if len(rs.Content) == 0 {
		rs.Style = yaml.FlowStyle
	}
	addKV(doc, "plans", plans)
	addKV(doc, "rules", rs)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode set %q: %w", f.Set, err)
	}
	return b.Bytes(), nil
}

// fieldsNode is v's JSON fields in order as a YAML mapping, without the
// server's fields and without those equal to their defaults.
func fieldsNode(v any, order []string, defaults map[string]string) (*yaml.Node, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range order {
		raw, ok := obj[k]
		if _, server := serverFields[k]; !ok || server {
			continue
		}
		var val any
		if err := json.Unmarshal(raw, &val); err != nil {
			return nil, err
		}
		if val == nil || val == "" || fmt.Sprint(val) == defaults[k] {
			continue
		}
		var n yaml.Node
		if err := n.Encode(val); err != nil {
			return nil, err
		}
		if f, ok := val.(float64); ok && f == float64(int64(f)) {
			n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(int64(f), 10)}
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &n)
	}
	return m, nil
}
