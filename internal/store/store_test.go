package store

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/rules"
)

// TestOpJSON: a batch written as POST /batch reads it (what diff --out
// saves) carries no zero time, no empty id and no version of its own; a
// delete only what names it; and it reads back to the same writes.
func TestOpJSON(t *testing.T) {
	t.Parallel()
	limit := int64(100)
	stored := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	b := Batch{Set: "platform", Ops: []Op{
		{Action: rules.ActionCreate, Plan: &rules.Plan{Name: "gold", Limit: 1000, Period: rules.Period(time.Minute)}},
		{Action: rules.ActionCreate, Rule: &rules.Rule{API: "*", Route: "*", Subject: "*", Limit: &limit, Period: rules.Period(time.Minute)}},
		{Action: rules.ActionUpdate, Rule: &rules.Rule{ID: "5f0c", API: "shop", Route: "*", Subject: "*", Limit: &limit, Period: rules.Period(time.Minute),
			Version: 3, CreatedAt: stored, UpdatedAt: stored}, IfVersion: 3},
		{Action: rules.ActionDelete, Plan: &rules.Plan{Name: "old"}, IfVersion: 2},
	}}
	got, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"set":"platform","ops":[` +
		`{"action":"create","plan":{"name":"gold","limit":1000,"period":"1m"}},` +
		`{"action":"create","rule":{"api":"*","route":"*","subject":"*","limit":100,"period":"1m"}},` +
		`{"action":"update","rule":{"id":"5f0c","api":"shop","route":"*","subject":"*","limit":100,"period":"1m"},"if_version":3},` +
		`{"action":"delete","plan":{"name":"old"},"if_version":2}]}`
	if string(got) != want {
		t.Errorf("json.Marshal(batch) =\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []string{"0001-01-01", `"id":""`, `"version"`} {
		if strings.Contains(string(got), bad) {
			t.Errorf("json.Marshal(batch) holds %s", bad)
		}
	}
	var back Batch
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	b.Ops[2].Rule.Version, b.Ops[2].Rule.CreatedAt, b.Ops[2].Rule.UpdatedAt = 0, time.Time{}, time.Time{}
	if diff := cmp.Diff(b, back); diff != "" {
		t.Errorf("read back (-sent +read):\n%s", diff)
	}
}
