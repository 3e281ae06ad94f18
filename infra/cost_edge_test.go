package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestCostEdge prices the CDN edge (-c edge=cloudfront) from its
// template and prices.json: what it adds to every request, what a
// request it denies saves (API Gateway's REST request and the
// authorizer's decision), so the blocked share of traffic above which
// it pays, with CloudFront added for it, already in front, or on a
// flat-rate plan; and its fixed month (the publisher's runs, its two
// secrets). docs/cost.md's edge table is what it computes
// (-update-cost rewrites it).
func TestCostEdge(t *testing.T) {
	p := readPrices(t)
	_, js := synth(t, edged)
	e := costOf(js, p)
	missing := e.missing
	var secrets float64
	for _, l := range e.idle {
		if strings.Contains(l.what, "EdgeKey") || strings.Contains(l.what, "OriginVerify") {
			secrets += l.usd
		}
	}
	if secrets == 0 {
		t.Error("no edge secrets priced: the template walk is broken")
	}
	const runs = hoursPerMonth * 60 // the schedule: once a minute
	publisher := runs*p.price("assume:edge-publisher-seconds", missing)*256.0/1024*p.price("AWS::Lambda::Function:arm-gb-second", missing) +
		runs/1e6*p.price("AWS::Lambda::Function:million-requests", missing)
	fixed := publisher + secrets
	saved := p.price("apigw:rest-million", missing) + e.perMillTotal()
	fn := p.price("cloudfront:function-million", missing) + p.price("cloudfront:kvs-read-million", missing)
	rows := []struct {
		front string
		perMn float64
	}{
		{"CloudFront, added", p.price("cloudfront:https-million", missing) + fn},
		{"CloudFront, already", fn},
		{"flat-rate plan", p.price("cloudfront:kvs-read-million", missing)},
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range missing {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Errorf("%s has no price %q", priceFile, k)
	}
	var w strings.Builder
	fmt.Fprintf(&w, "\nA million denied there save %.3f USD; it costs %.2f USD a month (publisher %.2f).\n\n", saved, fixed, publisher)
	w.WriteString("| in front | USD per million | pays above blocked share |\n| --- | ---: | ---: |\n")
	for _, r := range rows {
		share := r.perMn / saved
		fmt.Fprintf(&w, "| %s | %.3f | %.1f %% |\n", r.front, r.perMn, 100*share)
	}
	w.WriteString("\n")
	if rows[0].perMn <= rows[1].perMn || rows[1].perMn <= rows[2].perMn || saved <= rows[0].perMn {
		t.Errorf("edge per million %v, saved %v: want CloudFront added > already in front > flat rate, and a denial saving more than a request costs", rows, saved)
	}

	doc, err := os.ReadFile(costDoc)
	if err != nil {
		t.Fatal(err)
	}
	got, want := between(t, doc, "edge"), w.String()
	switch {
	case got == want:
	case *updateCost:
		at := bytes.Index(doc, []byte("<!-- edge:begin -->")) + len("<!-- edge:begin -->")
		doc = append(append(doc[:at:at], want...), doc[at+len(got):]...)
		if err := os.WriteFile(costDoc, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		t.Errorf("docs/cost.md's edge table differs from the model; run go test ./infra -run TestCostEdge -update-cost\ngot:%s\nwant:%s", got, want)
	}
}
