package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestExecutionLogsUpgrade enters an update as CloudFormation does, from a
// stack deployed before the execution log groups were the stack's to this
// template. The previous layout is this template without them: without
// every resource that names an API-Gateway-Execution-Logs_ group, and
// without what only those refer to.
//
// In that account each stage that logs already has its group: API Gateway
// creates API-Gateway-Execution-Logs_{rest-api-id}/{stage-name} itself on
// its first execution log ("Set up CloudWatch logging for REST APIs in API
// Gateway", API Gateway Developer Guide), and Lambda creates
// /aws/lambda/{function-name} for a function that names no log group. A
// resource the update adds with one of those names must adopt the group,
// since CloudFormation's create of an AWS::Logs::LogGroup fails with
// "already exists". Adoption is either a Custom::LogRetention (aws-cdk-lib's
// log-retention handler ignores ResourceAlreadyExistsException and sets the
// retention) or CloudFormation's import of existing resources, which takes
// a resource only with a static name and a DeletionPolicy of Retain or
// RetainExceptOnCreate ("Import AWS resources into a CloudFormation stack
// automatically", CloudFormation User Guide).
func TestExecutionLogsUpgrade(t *testing.T) {
	for _, v := range allVariants() {
		_, js := synth(t, v)
		now, _ := js["Resources"].(map[string]any)
		before, err := withoutExecutionLogs(now)
		if err != nil {
			t.Errorf("%s: the previous layout: %v", v, err)
			continue
		}
		existing := implicitLogGroups(before)
		stages := 0
		for _, who := range existing {
			if strings.HasPrefix(who, "stage ") {
				stages++
			}
		}
		adopted := 0
		for _, id := range slices.Sorted(maps.Keys(now)) {
			if _, ok := before[id]; ok {
				continue
			}
			r, _ := now[id].(map[string]any)
			name, ok := logGroupName(r)
			if !ok {
				continue
			}
			who, ok := existing[name]
			if !ok {
				continue
			}
			if how := adoption(r); how == "" {
				t.Errorf("%s: an upgrade from a stack without execution log groups creates %s (%s) named %s, which %s already created: the update fails with \"already exists\"",
					v, id, r["Type"], name, who)
			} else {
				adopted++
			}
		}
		if adopted != stages {
			t.Errorf("%s: %d of %d logging stages' existing execution log groups adopted by the update", v, adopted, stages)
		}
	}
}

// withoutExecutionLogs returns a copy of the template's resources without
// the execution log groups: each resource that names one, then, until none
// is left, each that only removed resources refer to. A remaining
// resource's DependsOn on a removed one is dropped; a property that refers
// to one is an error, as that template would not deploy.
func withoutExecutionLogs(now map[string]any) (map[string]any, error) {
	gone := map[string]bool{}
	for id, r := range now {
		if b, _ := json.Marshal(r); strings.Contains(string(b), "API-Gateway-Execution-Logs_") {
			gone[id] = true
		}
	}
	if len(gone) == 0 {
		return nil, errors.New("no resource names an execution log group")
	}
	referrers := map[string][]string{} // id → ids that refer to it
	for id, r := range now {
		m, _ := r.(map[string]any)
		for _, to := range append(refs(m["Properties"]), dependsOn(m)...) {
			referrers[to] = append(referrers[to], id)
		}
	}
	for changed := true; changed; {
		changed = false
		for id := range now {
			by := referrers[id]
			if gone[id] || len(by) == 0 || slices.ContainsFunc(by, func(r string) bool { return !gone[r] }) {
				continue
			}
			gone[id], changed = true, true
		}
	}
	before := map[string]any{}
	for id, r := range now {
		if gone[id] {
			continue
		}
		m := maps.Clone(r.(map[string]any))
		for _, to := range refs(m["Properties"]) {
			if gone[to] {
				return nil, fmt.Errorf("%s refers to %s, which goes with the execution log groups", id, to)
			}
		}
		if deps := dependsOn(m); len(deps) > 0 {
			deps = slices.DeleteFunc(deps, func(d string) bool { return gone[d] })
			m["DependsOn"] = deps
		}
		before[id] = m
	}
	return before, nil
}

// dependsOn is r's DependsOn, a string or a list.
func dependsOn(r map[string]any) []string {
	switch d := r["DependsOn"].(type) {
	case string:
		return []string{d}
	case []any:
		var out []string
		for _, e := range d {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// implicitLogGroups are the log groups AWS creates by itself for the
// template's resources, by name (nameKey) → what creates it: each stage's
// execution logs when its method settings log, and each function's logs
// when it names no log group.
func implicitLogGroups(res map[string]any) map[string]string {
	out := map[string]string{}
	for id, r := range res {
		m, _ := r.(map[string]any)
		p, _ := m["Properties"].(map[string]any)
		switch m["Type"] {
		case "AWS::ApiGateway::Stage":
			settings, _ := p["MethodSettings"].([]any)
			if !slices.ContainsFunc(settings, func(s any) bool {
				l, _ := s.(map[string]any)["LoggingLevel"].(string)
				return l == "ERROR" || l == "INFO"
			}) {
				continue
			}
			name := nameKey(map[string]any{"Fn::Join": []any{"", []any{"API-Gateway-Execution-Logs_", p["RestApiId"], "/", p["StageName"]}}})
			out[name] = "stage " + id + " (API Gateway)"
		case "AWS::Lambda::Function":
			if lc, _ := p["LoggingConfig"].(map[string]any); lc["LogGroup"] != nil {
				continue
			}
			fn := p["FunctionName"]
			if fn == nil {
				fn = map[string]any{"Ref": id}
			}
			out[nameKey(map[string]any{"Fn::Join": []any{"", []any{"/aws/lambda/", fn}}})] = "function " + id + " (Lambda)"
		}
	}
	return out
}

// logGroupName is the name a log group resource gives its group, if fixed.
func logGroupName(r map[string]any) (string, bool) {
	p, _ := r["Properties"].(map[string]any)
	switch r["Type"] {
	case "AWS::Logs::LogGroup", "Custom::LogRetention":
		if n := p["LogGroupName"]; n != nil {
			return nameKey(n), true
		}
	}
	return "", false
}

// adoption is how r takes over a group that exists, or "".
func adoption(r map[string]any) string {
	if r["Type"] == "Custom::LogRetention" {
		return "LogRetention creates the group or sets the retention of the one there"
	}
	p, _ := r["Properties"].(map[string]any)
	if _, static := p["LogGroupName"].(string); static && (r["DeletionPolicy"] == "Retain" || r["DeletionPolicy"] == "RetainExceptOnCreate") {
		return "cdk deploy --import-existing-resources"
	}
	return ""
}

// nameKey writes a name as a string whatever the intrinsics that build it:
// a Ref is ${id}, an Fn::Join is its parts joined.
func nameKey(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if id, ok := x["Ref"].(string); ok {
			return "${" + id + "}"
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			sep, _ := j[0].(string)
			parts, _ := j[1].([]any)
			var s []string
			for _, p := range parts {
				s = append(s, nameKey(p))
			}
			return strings.Join(s, sep)
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
