package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/stats/insights"
)

// TestContributorInsights: the four rules over the deciding functions'
// log groups, keyed and filtered on the decision log line's fields; a
// dashboard widget per rule; and the stats function allowed to read
// exactly these rules' reports, from outside the VPC.
func TestContributorInsights(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		rules := resources(js, "AWS::CloudWatch::InsightRule")
		if len(rules) != 4 {
			t.Fatalf("%s: %d insight rules, want 4", v, len(rules))
		}
		var names, ids []string
		for _, r := range rules {
			names = append(names, r.Props["RuleName"].(string))
			ids = append(ids, r.ID)
			body, _ := json.Marshal(r.Props["RuleBody"])
			for _, want := range []string{`CloudWatchLogRule`, `\"LogFormat\":\"JSON\"`, `\"Match\":\"$.decision\"`, `\"AggregateOn\":\"Count\"`} {
				if !strings.Contains(string(body), want) {
					t.Errorf("%s: rule %s body %s lacks %s", v, r.ID, body, want)
				}
			}
			for _, fn := range []string{"AuthorizerFunctionLogs", "CheckLogs"} {
				if !strings.Contains(string(body), `{"Ref":"`+fn) {
					t.Errorf("%s: rule %s body %s does not read %s", v, r.ID, body, fn)
				}
			}
			if r.Props["RuleState"] != "ENABLED" {
				t.Errorf("%s: rule %s state %v", v, r.ID, r.Props["RuleState"])
			}
		}
		slices.Sort(names)
		want := insights.RuleNames("Sluice-sluice")
		slices.Sort(want)
		if !slices.Equal(names, want) {
			t.Errorf("%s: rule names %v, want %v", v, names, want)
		}
		bodies, _ := json.Marshal(rules)
		for _, key := range []string{`$.principalId`, `$.ruleId`, `$.api`, `fail-open`, `shadow-deny`, `deny`} {
			if !strings.Contains(string(bodies), key) {
				t.Errorf("%s: no rule mentions %s", v, key)
			}
		}

		// Each rule's keys, in the order internal/stats/insights reads a
		// contributor's Keys, and its filters: only the shown subjects rule
		// keys on "subject" (which the authorizer writes for an opted-in
		// identity, never a credential: TestInvokeShownSubjects), and only
		// over lines that have it, so the others count hash-only lines.
		type contribution struct {
			Keys    []string
			Filters []map[string]any
		}
		wantKeys := map[string][]string{
			"InsightsDeniedSubjects": {"$.principalId", "$.ruleId", "$.api"},
			"InsightsLimitingRules":  {"$.ruleId", "$.api", "$.decision"},
			"InsightsFailOpenRules":  {"$.ruleId", "$.api"},
			"InsightsShownSubjects":  {"$.principalId", "$.subject"},
		}
		for _, r := range rules {
			var body struct{ Contribution contribution }
			if err := json.Unmarshal([]byte(ruleBodyJSON(t, r.Props["RuleBody"])), &body); err != nil {
				t.Fatalf("%s: rule %s body: %v", v, r.ID, err)
			}
			id := strings.TrimRightFunc(r.ID, func(c rune) bool { return c >= '0' && c <= '9' || c >= 'A' && c <= 'F' })
			if !slices.Equal(body.Contribution.Keys, wantKeys[id]) {
				t.Errorf("%s: rule %s keys %v, want %v", v, r.ID, body.Contribution.Keys, wantKeys[id])
			}
			present := slices.ContainsFunc(body.Contribution.Filters, func(f map[string]any) bool {
				return f["Match"] == "$.subject" && f["IsPresent"] == true
			})
			if present != (id == "InsightsShownSubjects") {
				t.Errorf("%s: rule %s filters %v: subject IsPresent = %v", v, r.ID, body.Contribution.Filters, present)
			}
			for _, k := range body.Contribution.Keys {
				if !slices.Contains([]string{"$.principalId", "$.ruleId", "$.api", "$.decision", "$.subject"}, k) {
					t.Errorf("%s: rule %s keys on %s, not a field of the decision line", v, r.ID, k)
				}
			}
		}

		// The reader, admin-stats (GET /stats and POST /subjects/find):
		// the rule prefix, no VPC, no Redis; the subject hash key alone
		// besides, for the find (TestLeastPrivilege).
		readers := map[string]string{"AdminStats": ""}
		for _, fn := range sluiceFunctions(js) {
			for prefix := range readers {
				if !strings.HasPrefix(fn.ID, prefix) {
					continue
				}
				readers[prefix] = fn.ID
				if got := envOf(fn)["INSIGHTS_RULE_PREFIX"]; got != "Sluice-sluice" {
					t.Errorf("%s: %s INSIGHTS_RULE_PREFIX = %v", v, fn.ID, got)
				}
				if _, ok := fn.Props["VpcConfig"]; ok {
					t.Errorf("%s: %s is in the VPC, which has no route to CloudWatch", v, fn.ID)
				}
				if _, ok := envOf(fn)["REDIS_URL"]; ok {
					t.Errorf("%s: %s gets REDIS_URL; it needs none", v, fn.ID)
				}
				if _, ok := envOf(fn)["SUBJECT_HMAC_KEY_SECRET_ARN"]; !ok {
					t.Errorf("%s: %s has no SUBJECT_HMAC_KEY_SECRET_ARN; POST /subjects/find hashes a subject", v, fn.ID)
				}
			}
		}
		for prefix, id := range readers {
			if id == "" {
				t.Fatalf("%s: no %s function", v, prefix)
			}
		}

		// The grant: GetInsightRuleReport on exactly the four rules, to
		// the readers' roles, and to no one else.
		var grants int
		granted := map[string]bool{}
		for _, p := range resources(js, "AWS::IAM::Policy") {
			doc, _ := json.Marshal(p.Props["PolicyDocument"])
			if !strings.Contains(string(doc), "cloudwatch:GetInsightRuleReport") {
				continue
			}
			grants++
			roles, _ := json.Marshal(p.Props["Roles"])
			switch {
			case strings.Contains(string(roles), `"Ref":"AdminStats`):
				granted["AdminStats"] = true
			default:
				t.Errorf("%s: %s grants GetInsightRuleReport to %s, want only the readers' roles", v, p.ID, roles)
			}
			for _, st := range p.Props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				s := st.(map[string]any)
				if s["Action"] != "cloudwatch:GetInsightRuleReport" {
					continue
				}
				res, _ := s["Resource"].([]any)
				var got []string
				for _, r := range res {
					ga, _ := r.(map[string]any)["Fn::GetAtt"].([]any)
					if len(ga) == 2 && ga[1] == "Arn" {
						got = append(got, ga[0].(string))
					} else {
						t.Errorf("%s: GetInsightRuleReport resource %v, want a rule's Arn", v, r)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, ids) {
					t.Errorf("%s: GetInsightRuleReport on %v, want exactly %v", v, got, ids)
				}
			}
		}
		if grants != 1 || len(granted) != 1 {
			t.Errorf("%s: %d policies grant GetInsightRuleReport (to %v), want 1: admin-stats's", v, grants, granted)
		}

		// The dashboard: one widget per rule but the shown subjects one
		// (subjects as sent stay with the admin API's readers).
		var found bool
		for _, d := range resources(js, "AWS::CloudWatch::Dashboard") {
			body, _ := json.Marshal(d.Props["DashboardBody"])
			if !strings.Contains(string(body), "insightRule") {
				continue
			}
			found = true
			for _, id := range ids {
				want := 1
				if strings.HasPrefix(id, "InsightsShownSubjects") {
					want = 0
				}
				if got := strings.Count(string(body), `"Fn::GetAtt":["`+id+`","RuleName"]`); got != want {
					t.Errorf("%s: insights dashboard %s has %d widgets for %s, want %d", v, body, got, id, want)
				}
			}
		}
		// The small profile has no dashboards (docs/cost.md); GET /stats
		// reads the rules all the same.
		if wantDash := v != small; found != wantDash {
			t.Errorf("%s: a dashboard with insight rule widgets = %v, want %v", v, found, wantDash)
		}
	}
}

// ruleBodyJSON is a synthesized RuleBody as JSON: the stack renders it as a
// string, or as Fn::Join of strings and the log groups' Refs, which stand in
// here as "" (the keys and filters are literal).
func ruleBodyJSON(t *testing.T, v any) string {
	t.Helper()
	switch b := v.(type) {
	case string:
		return b
	case map[string]any:
		join, _ := b["Fn::Join"].([]any)
		if len(join) == 2 {
			parts, _ := join[1].([]any)
			var sb strings.Builder
			for _, p := range parts {
				if s, ok := p.(string); ok {
					sb.WriteString(s)
				}
			}
			return sb.String()
		}
	}
	t.Fatalf("rule body %v is neither a string nor an Fn::Join", v)
	return ""
}
