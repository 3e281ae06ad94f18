package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
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

// TestExecutionLogsFromLogGroups enters the updates from the layout that
// had the execution log groups as AWS::Logs::LogGroup resources (commit
// bbb639d to 8e82e5e) as CloudFormation does (cfnUpdate), from an empty
// account: that layout's logical ids are this template's, so a direct
// update changes their type, which CloudFormation refuses; one deploy
// with -c executionLogGroups=false and then one without leave every
// logging stage's group the stack's, kept a month. Updates from the layout
// without the groups (TestExecutionLogsUpgrade) and from this one work too.
func TestExecutionLogsFromLogGroups(t *testing.T) {
	// The flag's template is this one less the execution log groups and
	// what only they use (withoutExecutionLogs), nothing else.
	p := variantProps(full)
	p.NoExecutionLogGroups = true
	st, err := NewStack(newApp(variantContext(full)), "Sluice", p)
	if err != nil {
		t.Fatal(err)
	}
	var flagged map[string]any
	b, _ := json.Marshal(assertions.Template_FromStack(st.Stack, nil).ToJSON())
	if err := json.Unmarshal(b, &flagged); err != nil {
		t.Fatal(err)
	}
	flaggedRes, _ := flagged["Resources"].(map[string]any)
	_, js := synth(t, full)
	now, _ := js["Resources"].(map[string]any)
	without, err := withoutExecutionLogs(now)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(flaggedRes)), slices.Sorted(maps.Keys(without)); !slices.Equal(got, want) {
		t.Errorf("-c executionLogGroups=false: resources %v,\nwant this template's less the execution log groups' %v", got, want)
	}

	for _, v := range allVariants() {
		_, js := synth(t, v)
		now, _ := js["Resources"].(map[string]any)
		l0, err := withoutExecutionLogs(now)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		l1 := logGroupLayout(l0, now)
		flag := l0
		if v == full {
			flag = flaggedRes
		}
		for _, tt := range []struct {
			name    string
			deploys []map[string]any
			fails   string
		}{
			{"log groups, then this", []map[string]any{l1, now}, "Update of resource type is not permitted"},
			{"log groups, the flag, then this", []map[string]any{l1, flag, now}, ""},
			{"no groups, then this", []map[string]any{l0, now}, ""},
			{"this, then this", []map[string]any{now, now}, ""},
		} {
			groups := map[string]float64{}
			before := map[string]any{}
			var err error
			for _, after := range tt.deploys {
				if err = cfnUpdate(before, after, groups); err != nil {
					break
				}
				before = after
			}
			switch {
			case tt.fails != "":
				if err == nil || !strings.Contains(err.Error(), tt.fails) {
					t.Errorf("%s: %s: %v, want %q", v, tt.name, err, tt.fails)
				}
				continue
			case err != nil:
				t.Errorf("%s: %s: %v", v, tt.name, err)
				continue
			}
			for name, who := range implicitLogGroups(now) {
				if !strings.HasPrefix(who, "stage ") {
					continue
				}
				if days, ok := groups[name]; !ok || days != 30 {
					t.Errorf("%s: %s: %s kept %v days (ok %v), want 30 (a month)", v, tt.name, name, days, ok)
				}
			}
		}
	}
}

// logGroupLayout is now as the layout of bbb639d had it: the resources of
// l0 (now without the execution log groups), and each of now's
// Custom::LogRetention of an execution log group as the AWS::Logs::LogGroup
// it was, under the same logical id, a month, deleted with the stack.
func logGroupLayout(l0, now map[string]any) map[string]any {
	out := maps.Clone(l0)
	for id, r := range now {
		m, _ := r.(map[string]any)
		p, _ := m["Properties"].(map[string]any)
		if m["Type"] != "Custom::LogRetention" || !strings.Contains(nameKey(p["LogGroupName"]), "API-Gateway-Execution-Logs_") {
			continue
		}
		out[id] = map[string]any{
			"Type":                "AWS::Logs::LogGroup",
			"Properties":          map[string]any{"LogGroupName": p["LogGroupName"], "RetentionInDays": 30.0},
			"UpdateReplacePolicy": "Delete", "DeletionPolicy": "Delete",
		}
	}
	return out
}

// cfnUpdate applies the update of a stack from before to after (an empty
// before: its creation) to the account's log groups, name → days kept (0:
// forever), as CloudFormation does: it refuses a logical id whose type
// changes ("Update of resource type is not permitted"), creates and
// updates (an AWS::Logs::LogGroup fails on a name that exists;
// LogRetention creates the group or sets its retention), then deletes
// what after left out in its cleanup, by the policy before gave it. Then
// each logging stage logs once: API Gateway creates a missing group,
// kept forever.
func cfnUpdate(before, after map[string]any, groups map[string]float64) error {
	typ := func(r any) any { return r.(map[string]any)["Type"] }
	for _, id := range slices.Sorted(maps.Keys(after)) {
		if b, ok := before[id]; ok && typ(b) != typ(after[id]) {
			return fmt.Errorf("%s: Update of resource type is not permitted (%v to %v)", id, typ(b), typ(after[id]))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(after)) {
		r := after[id].(map[string]any)
		name, ok := logGroupName(r)
		if !ok {
			continue
		}
		p, _ := r["Properties"].(map[string]any)
		_, had := before[id]
		if _, exists := groups[name]; exists && !had && r["Type"] == "AWS::Logs::LogGroup" {
			return fmt.Errorf("%s: Resource of type 'AWS::Logs::LogGroup' with identifier '%s' already exists", id, name)
		}
		groups[name] = num(p["RetentionInDays"])
	}
	for _, id := range slices.Sorted(maps.Keys(before)) {
		if _, kept := after[id]; kept {
			continue
		}
		r := before[id].(map[string]any)
		name, ok := logGroupName(r)
		if !ok {
			continue
		}
		p, _ := r["Properties"].(map[string]any)
		switch {
		case r["Type"] == "AWS::Logs::LogGroup" && r["DeletionPolicy"] != "Retain" && r["DeletionPolicy"] != "RetainExceptOnCreate",
			r["Type"] == "Custom::LogRetention" && p["RemovalPolicy"] == "destroy":
			delete(groups, name)
		}
	}
	for name, who := range implicitLogGroups(after) {
		if _, ok := groups[name]; !ok && strings.HasPrefix(who, "stage ") {
			groups[name] = 0
		}
	}
	return nil
}
