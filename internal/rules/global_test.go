package rules

import (
	"strings"
	"testing"
	"time"
)

func TestGlobalKeyIsTheScope(t *testing.T) {
	lim := int64(10)
	a := Rule{ID: "a", API: "api1", Route: "GET /x", Subject: "*", Limit: &lim, Period: Period(time.Minute), Global: true}
	b := a
	b.ID = "b" // another Region's id for the same rule
	if GlobalKey(a) != GlobalKey(b) {
		t.Fatal("the same scope under two ids has two keys")
	}
	for _, c := range []func(*Rule){
		func(r *Rule) { r.API = "api2" },
		func(r *Rule) { r.Route = "GET /y" },
		func(r *Rule) { r.Subject = "k" },
		func(r *Rule) { r.Kind = Quota },
		func(r *Rule) { r.Dimension = "ip" },
	} {
		c2 := a
		c(&c2)
		if GlobalKey(c2) == GlobalKey(a) {
			t.Errorf("%+v shares a's key", c2)
		}
	}
	d := a
	d.Dimension = "default"
	if GlobalKey(d) != GlobalKey(a) {
		t.Error(`dimension "default" is the default dimension`)
	}
}

func TestGlobalValidation(t *testing.T) {
	lim, floor := int64(10), int64(2)
	base := Rule{API: "*", Route: "*", Subject: "*", Limit: &lim, Period: Period(time.Minute), Global: true}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]func(*Rule){
		"shadow":        func(r *Rule) { r.Mode = Shadow },
		"min_remaining": func(r *Rule) { r.MinRemaining = &floor },
		"durable":       func(r *Rule) { r.Kind, r.Period, r.Durable = Quota, Period(Day), true },
		"1m":            func(r *Rule) { r.Period = Period(time.Second) },
	} {
		r := base
		c(&r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), "global") && !strings.Contains(err.Error(), "1m") {
			t.Errorf("%s: %v", name, err)
		}
	}
	p := Plan{Name: "g", Limit: 5, Period: Period(time.Second), Global: true}
	if p.Validate() == nil {
		t.Error("a global plan of 1s validated")
	}
	p.Period = Period(time.Hour)
	r := Rule{API: "*", Route: "*", Subject: "*", Plan: "g", Mode: Shadow}
	if r.ValidateWithPlan(p) == nil {
		t.Error("a shadow rule of a global plan validated")
	}
	s := NewSnapshot([]Rule{{ID: "r1", API: "*", Route: "*", Subject: "*", Plan: "g"}}, []Plan{p}, SnapshotOptions{})
	if e := s.Rules(); len(e) != 1 || e[0].GlobalKey == "" {
		t.Errorf("a rule of a global plan is not global: %+v", e)
	}
}
