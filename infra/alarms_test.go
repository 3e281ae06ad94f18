package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestAlarmsPage: one transient event pages once at most. Fail-open and
// the breaker alarm on 2 of 3 one-minute datapoints, so a Redis failover
// (about 30 s) alone does not page; fail-closed stays on the first
// minute, since it refuses callers within their limits. The authorizer's
// start failures and timeouts are alarmed on from its log, with no API
// name. Lambda writes "Runtime.ExitError" in the log when the runtime
// process exits, "Status: timeout" in INIT_REPORT when the init phase
// runs past 10 s, and "Task timed out" when an invocation does (AWS Lambda
// Developer Guide, "Lambda execution environment lifecycle" and
// "Troubleshoot invocation issues").
func TestAlarmsPage(t *testing.T) {
	for _, v := range []variant{full, small, lean} {
		_, js := synth(t, v)
		alarms := map[string]map[string]any{}
		for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
			alarms[strings.TrimRight(r.ID, "0123456789ABCDEF")] = r.Props
		}
		for id, want := range map[string][2]float64{
			"FailOpenAlarm": {2, 3}, "BreakerOpenAlarm": {2, 3}, "FailClosedAlarm": {1, 1}, "AuthorizerStartFailuresAlarm": {1, 1},
			"RulesRefusedAlarm": {1, 1},
		} {
			a, ok := alarms[id]
			if !ok {
				t.Errorf("%s: no %s among %v", v, id, keys(alarms))
				continue
			}
			got := [2]float64{num(a["DatapointsToAlarm"]), num(a["EvaluationPeriods"])}
			if got != want {
				t.Errorf("%s: %s on %v of %v datapoints, want %v of %v", v, id, got[0], got[1], want[0], want[1])
			}
		}
		// A refused rules snapshot is counted by every decider the
		// fail-closed alarm watches.
		refused, _ := json.Marshal(alarms["RulesRefusedAlarm"]["Metrics"])
		closed, _ := json.Marshal(alarms["FailClosedAlarm"]["Metrics"])
		if n, want := strings.Count(string(refused), `"MetricName":"RulesRefused"`), strings.Count(string(closed), `"MetricName":"FailClosed"`); n != want || n == 0 {
			t.Errorf("%s: RulesRefusedAlarm watches %d deciders' RulesRefused, want the %d FailClosedAlarm watches", v, n, want)
		}
		filters := resources(js, "AWS::Logs::MetricFilter")
		var found bool
		for _, f := range filters {
			pattern := fmt.Sprint(f.Props["FilterPattern"])
			if !strings.Contains(pattern, "Runtime.ExitError") || !strings.Contains(pattern, "Status: timeout") || !strings.Contains(pattern, "Task timed out") {
				continue
			}
			found = true
			group := refs(f.Props["LogGroupName"])
			fn := logicalIDOr(js, "AWS::Lambda::Function", "AuthorizerFunction")
			lc, _ := js["Resources"].(map[string]any)[fn].(map[string]any)["Properties"].(map[string]any)["LoggingConfig"].(map[string]any)
			if len(group) != 1 || fmt.Sprint(refs(lc["LogGroup"])) != fmt.Sprint(group) {
				t.Errorf("%s: start-failure filter on %v, want the authorizer's log group %v", v, group, refs(lc["LogGroup"]))
			}
			tr, _ := json.Marshal(f.Props["MetricTransformations"])
			am, _ := json.Marshal(alarms["AuthorizerStartFailuresAlarm"]["MetricName"])
			if !strings.Contains(string(tr), string(am)) {
				t.Errorf("%s: the start-failure alarm watches %s, the filter writes %s", v, am, tr)
			}
		}
		if !found {
			t.Errorf("%s: no metric filter for the authorizer's start failures among %d", v, len(filters))
		}
	}
}

// TestNoProtectedAPIWarns: a stack that names no API behind its
// authorizer says at synth that no alarm watches those APIs' 5XX.
func TestNoProtectedAPIWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("synthesizes twice")
	}
	for _, tt := range []struct {
		names []string
		want  int
	}{{nil, 1}, {[]string{"shop"}, 0}} {
		st, err := NewStack(newApp(nil), "Sluice", &StackProps{AssetRoot: assetRoot, Profile: "small", ProtectedAPINames: tt.names})
		if err != nil {
			t.Fatal(err)
		}
		got := assertions.Annotations_FromStack(st.Stack).FindWarning(jsii.String("*"),
			assertions.Match_StringLikeRegexp(jsii.String("no API behind the authorizer is named.*protectedApiNames")))
		if len(*got) != tt.want {
			t.Errorf("ProtectedAPINames %v: %d noProtectedApi warnings, want %d", tt.names, len(*got), tt.want)
		}
	}
}

// TestMaintenanceWindow: the Redis replication group, the Aurora cluster
// and its instance get the window, and Aurora a backup window outside it;
// a window RDS or ElastiCache would refuse at deploy is refused at synth.
func TestMaintenanceWindow(t *testing.T) {
	_, js := synth(t, full)
	for _, typ := range []string{"AWS::ElastiCache::ReplicationGroup", "AWS::RDS::DBCluster", "AWS::RDS::DBInstance"} {
		rs := resources(js, typ)
		if len(rs) != 1 || rs[0].Props["PreferredMaintenanceWindow"] != defaultMaintenanceWindow {
			t.Errorf("full: %s maintenance windows %v, want one %s", typ, rs, defaultMaintenanceWindow)
		}
	}
	if db := resources(js, "AWS::RDS::DBCluster"); len(db) != 1 || db[0].Props["PreferredBackupWindow"] != backupWindow {
		t.Errorf("full: DBCluster backup window, want %s", backupWindow)
	}
	if err := checkWindow(defaultMaintenanceWindow); err != nil {
		t.Errorf("checkWindow(default) = %v", err)
	}
	for w, want := range map[string]string{
		"sat:22:00-sun:00:30": "", "sat:22:00-sun:02:00": "overlaps", "mon:04:00-mon:05:00": "", "sun:23:30-mon:00:59": "",
		"sun:3:00-sun:04:00": "want ddd:hh:mm", "Sun:03:00-Sun:04:00": "want ddd:hh:mm",
		"sun:03:00-sun:03:30": "lasts 30 minutes", "mon:00:00-wed:00:00": "lasts 2880 minutes",
		"tue:00:30-tue:01:30": "overlaps", "tue:01:15-tue:02:30": "overlaps", "sun:23:00-mon:01:00": "",
		"sun:23:00-mon:01:01": "overlaps",
	} {
		err := checkWindow(w)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("checkWindow(%q) = %v, want %q", w, err, want)
		}
	}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func keys(m map[string]map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestAdminTimeout: no function behind API Gateway runs as long as the
// gateway waits (29 s, "Amazon API Gateway quotas": integration timeout),
// so a call that runs out ends with the function's own answer and log
// line, not the gateway's 504 while it still runs.
func TestAdminTimeout(t *testing.T) {
	_, js := synth(t, full)
	var n int
	for _, fn := range resources(js, "AWS::Lambda::Function") {
		timeout := num(fn.Props["Timeout"])
		if timeout >= 29 && timeout < 60 {
			t.Errorf("function %s: Timeout %v s, want under API Gateway's 29 s", fn.ID, timeout)
		}
		if timeout == adminTimeout {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d functions with the admin timeout %d s, want the 4 admin functions", n, adminTimeout)
	}
}
