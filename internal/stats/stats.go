// Package stats keeps in-process rolling counts of rate-limit decisions:
// per rule (allowed, denied, shadow-denied, fail-open) and per denied
// subject, over the last minutes, and reports the top limiting rules and
// the top denied subjects over a window. `sluice local` records every
// decision into one Stats and answers the admin API's GET /stats from it;
// on AWS the same report is built from CloudWatch Contributor Insights
// (internal/stats/insights), and Report is the shape both answer with.
//
// Memory is bounded whatever the traffic: a fixed ring of time slots, a
// cap on the rules counted per slot, and a Space-Saving summary of the
// denied subjects per slot. Subjects are seen as hashes, and beside one as
// sent only when the authorizer chose to show it (an identity, by
// SUBJECT_SHOW).
package stats

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Each time slot is resolution long, and slots are kept: the longest
// window is slots×resolution (15m).
const (
	resolution = time.Minute
	slots      = 15
)

// Defaults of Options.
const (
	DefaultMaxRules = 1000
	DefaultSubjects = 512
)

// OtherRule is the rule id the counts of rules past Options.MaxRules are
// added to.
const OtherRule = "(other)"

// Decision is one decision to count.
type Decision struct {
	// Rule is the id of the limiting rule; decisions without one (no rule
	// applied) are not counted.
	Rule string
	// ShadowRule is the id of the shadow rule that would have denied, when
	// ShadowDenied: the shadow denial is counted under it, and the
	// decision's allow under Rule, when the two differ (an enforcing rule
	// applied beside the shadow one).
	ShadowRule string
	// API is the API the request was for.
	API string
	// SubjectHash is the subject's hash (hex), never the subject: a
	// subject may be an API key. Only read for denied decisions.
	SubjectHash string
	// Subject, when not "", is the subject as sent: only for an identity
	// whose source SUBJECT_SHOW opted in (a JWT claim, an upstream's
	// answer, an IP), never a credential; the authorizer decides. Only
	// read for denied decisions.
	Subject string
	// Allowed, ShadowDenied and FailOpen are the decision's outcome, as in
	// authorizer.Result: a decision is denied when !Allowed, else
	// shadow-denied when ShadowDenied, else allowed; FailOpen is counted
	// besides (a fail-open decision is also allowed).
	Allowed, ShadowDenied, FailOpen bool
}

// Options configure a Stats. The zero value is usable; each field's
// default is written on it.
type Options struct {
	// MaxRules bounds the rules counted per slot; later ones are added to
	// OtherRule. Default 1000.
	MaxRules int
	// Subjects is the capacity of each slot's Space-Saving summary of
	// denied (subject, rule, API) triples; default 512. A triple denied
	// more than 1/Subjects of the slot's denials is always in it, and no
	// count is off by more than denials/Subjects (always upward).
	Subjects int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Stats counts decisions. It is safe for concurrent use.
type Stats struct {
	o     Options
	mu    sync.Mutex
	slots []slot
}

type ruleKey struct{ rule, api string }

type subjectKey struct{ subject, rule, api string }

type counts struct{ allowed, denied, shadowDenied, failOpen int64 }

type slot struct {
	index    int64 // unix time / resolution; 0 = never used
	rules    map[ruleKey]*counts
	total    counts
	subjects spaceSaving
}

// New returns an empty Stats.
func New(o Options) *Stats {
	if o.MaxRules <= 0 {
		o.MaxRules = DefaultMaxRules
	}
	if o.Subjects <= 0 {
		o.Subjects = DefaultSubjects
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Stats{o: o, slots: make([]slot, slots)}
}

// MaxWindow is the longest window Report answers: slots×resolution.
func (s *Stats) MaxWindow() time.Duration { return slots * resolution }

// Record counts d. It is nil-safe: a nil Stats counts nothing.
func (s *Stats) Record(d Decision) {
	if s == nil || d.Rule == "" {
		return
	}
	idx := s.o.Now().UnixNano() / int64(resolution)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := &s.slots[idx%int64(len(s.slots))]
	if sl.index != idx {
		// A slot left from slots resolutions ago: start it afresh, reusing
		// its memory.
		sl.index = idx
		clear(sl.rules)
		sl.total = counts{}
		sl.subjects.reset(s.o.Subjects)
	}
	if sl.rules == nil {
		sl.rules = make(map[ruleKey]*counts)
	}
	c := s.ruleCounts(sl, ruleKey{d.Rule, d.API})
	for _, cc := range [2]*counts{c, &sl.total} {
		switch {
		case !d.Allowed:
			cc.denied++
		case d.ShadowDenied && (cc == &sl.total || d.ShadowRule == "" || d.ShadowRule == d.Rule):
			cc.shadowDenied++
		default:
			cc.allowed++
		}
		if d.FailOpen {
			cc.failOpen++
		}
	}
	if d.Allowed && d.ShadowDenied && d.ShadowRule != "" && d.ShadowRule != d.Rule {
		s.ruleCounts(sl, ruleKey{d.ShadowRule, d.API}).shadowDenied++
	}
	if !d.Allowed {
		sl.subjects.add(subjectKey{d.SubjectHash, d.Rule, d.API}, d.Subject)
	}
}

// ruleCounts returns the counts of k in sl, made when missing; past
// MaxRules rules, those of OtherRule.
func (s *Stats) ruleCounts(sl *slot, k ruleKey) *counts {
	c := sl.rules[k]
	if c == nil {
		if len(sl.rules) >= s.o.MaxRules {
			k = ruleKey{OtherRule, ""}
			c = sl.rules[k]
		}
		if c == nil {
			c = &counts{}
			sl.rules[k] = c
		}
	}
	return c
}

// Report is the answer of GET /stats: what was limited over a window.
type Report struct {
	// Source says where the numbers come from: "in-process" (this
	// process's own decisions, sluice local) or "contributor-insights"
	// (the deployed authorizers' decision log lines).
	Source string `json:"source"`
	// Window is the length of the window, such as "5m0s".
	Window string `json:"window"`
	// From and To bound the window (To is now).
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Rules are the top limiting rules, most denials first (then
	// shadow denials, fail-opens, allowed).
	Rules []RuleStat `json:"rules"`
	// Subjects are the top denied subjects, most denials first.
	Subjects []SubjectStat `json:"subjects"`
	// Series is the window's decisions per Step, oldest first, for a
	// chart.
	Series []Point `json:"series"`
	// Step is the length of one Series point, such as "1m0s".
	Step string `json:"step"`
}

// RuleStat is one rule's decisions over the window.
type RuleStat struct {
	Rule string `json:"rule"`
	API  string `json:"api"`
	// Allowed is absent when the source does not count allowed decisions
	// (Contributor Insights: only denials and fail-opens are logged).
	Allowed      *int64 `json:"allowed,omitempty"`
	Denied       int64  `json:"denied"`
	ShadowDenied int64  `json:"shadow_denied"`
	FailOpen     int64  `json:"fail_open"`
}

// SubjectStat is one subject's denials by one rule on one API.
type SubjectStat struct {
	// Subject is the subject's hash (hex).
	Subject string `json:"subject"`
	// Shown is the subject as sent, when its source is an identity that
	// SUBJECT_SHOW opted in (jwt, context, principal, ip); absent for a
	// credential (header, query, apikey), which is only ever a hash.
	Shown string `json:"shown,omitempty"`
	Rule  string `json:"rule"`
	API   string `json:"api"`
	// Denied is the number of denials; an upper bound, over by at most
	// the window's denials divided by the summary's capacity.
	Denied int64 `json:"denied"`
}

// Point is the decisions of one step of the window.
type Point struct {
	Time         time.Time `json:"t"`
	Allowed      *int64    `json:"allowed,omitempty"`
	Denied       int64     `json:"denied"`
	ShadowDenied int64     `json:"shadow_denied"`
	FailOpen     int64     `json:"fail_open"`
}

// Report returns the top n rules and subjects over the last window (a
// whole number of resolutions from one to MaxWindow, else clamped into
// that range), the current partial slot included.
func (s *Stats) Report(window time.Duration, n int) Report {
	k := int64(max(1, min(int(window/resolution), slots)))
	now := s.o.Now()
	cur := now.UnixNano() / int64(resolution)
	first := cur - k + 1
	rep := Report{
		Source: "in-process", Window: (time.Duration(k) * resolution).String(), Step: resolution.String(),
		From: time.Unix(0, first*int64(resolution)).UTC(), To: now.UTC(),
		Rules: []RuleStat{}, Subjects: []SubjectStat{},
	}
	rulesSum := map[ruleKey]counts{}
	subj := map[subjectKey]int64{}
	shown := map[string]string{} // hash → subject as sent, when shown

	s.mu.Lock()
	for idx := first; idx <= cur; idx++ {
		p := Point{Time: time.Unix(0, idx*int64(resolution)).UTC()}
		sl := &s.slots[idx%int64(len(s.slots))]
		if sl.index == idx {
			for key, c := range sl.rules {
				sum := rulesSum[key]
				sum.add(c)
				rulesSum[key] = sum
			}
			for _, e := range sl.subjects.entries {
				subj[e.key] += e.count
				if e.shown != "" {
					shown[e.key.subject] = e.shown
				}
			}
			p.Denied, p.ShadowDenied, p.FailOpen = sl.total.denied, sl.total.shadowDenied, sl.total.failOpen
			p.Allowed = new(sl.total.allowed)
		} else {
			p.Allowed = new(int64(0))
		}
		rep.Series = append(rep.Series, p)
	}
	s.mu.Unlock()

	for key, c := range rulesSum {
		rep.Rules = append(rep.Rules, RuleStat{Rule: key.rule, API: key.api, Allowed: new(c.allowed),
			Denied: c.denied, ShadowDenied: c.shadowDenied, FailOpen: c.failOpen})
	}
	SortRules(rep.Rules)
	for key, c := range subj {
		rep.Subjects = append(rep.Subjects, SubjectStat{Subject: key.subject, Shown: shown[key.subject], Rule: key.rule, API: key.api, Denied: c})
	}
	SortSubjects(rep.Subjects)
	rep.Rules = rep.Rules[:min(n, len(rep.Rules))]
	rep.Subjects = rep.Subjects[:min(n, len(rep.Subjects))]
	return rep
}

// TopContributors is Report for the admin API (admin's statsReader); it
// never fails.
func (s *Stats) TopContributors(_ context.Context, window time.Duration, n int) (Report, error) {
	return s.Report(window, n), nil
}

// SortRules orders rules most limiting first: denials, shadow denials,
// fail-opens, allowed, then by rule id and API so the order is stable.
func SortRules(rs []RuleStat) {
	slices.SortFunc(rs, func(a, b RuleStat) int {
		return cmp.Or(cmp.Compare(b.Denied, a.Denied), cmp.Compare(b.ShadowDenied, a.ShadowDenied),
			cmp.Compare(b.FailOpen, a.FailOpen), cmp.Compare(deref(b.Allowed), deref(a.Allowed)),
			cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.API, b.API))
	})
}

// SortSubjects orders subjects most denied first, then by hash, rule and
// API.
func SortSubjects(ss []SubjectStat) {
	slices.SortFunc(ss, func(a, b SubjectStat) int {
		return cmp.Or(cmp.Compare(b.Denied, a.Denied), cmp.Compare(a.Subject, b.Subject),
			cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.API, b.API))
	})
}

func (c *counts) add(o *counts) {
	c.allowed += o.allowed
	c.denied += o.denied
	c.shadowDenied += o.shadowDenied
	c.failOpen += o.failOpen
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
