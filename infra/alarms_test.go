package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestAlarmsPage: one transient event pages once at most. Fail-open and
// the breaker alarm on 3 of 5 one-minute datapoints, so a Redis failover
// (about 30 s) alone does not page (TestFailoverDoesNotPage); fail-closed stays on the first
// minute, since it refuses callers within their limits. The authorizer's
// start failures and timeouts are alarmed on from its log, with no API
// name (the lines it matches: TestStartFailureFilters).
func TestAlarmsPage(t *testing.T) {
	for _, v := range []variant{full, small, lean} {
		_, js := synth(t, v)
		alarms := map[string]map[string]any{}
		for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
			alarms[strings.TrimRight(r.ID, "0123456789ABCDEF")] = r.Props
		}
		for id, want := range map[string][2]float64{
			"FailOpenAlarm": {3, 5}, "BreakerOpenAlarm": {3, 5}, "FailClosedAlarm": {1, 1}, "AuthorizerStartFailuresAlarm": {1, 1},
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
			// What each pattern matches: TestStartFailureFilters.
			if !strings.HasPrefix(f.ID, "AuthorizerStartFailures") {
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

// TestFailoverDoesNotPage runs the fail-open and breaker alarms' rule, as
// synthesized, over a Redis outage starting at every second of a minute.
// A failover's shape, as internal/app's TestFailoverSentinel measures it
// on real servers: every decision fails open from the kill until the
// promotion, then until the breaker's next probe, at most its 1 s
// cool-down later (-v: promoted 1.48 s after the kill, decided by Redis
// 0.57 s after that). ElastiCache promotes in about 30 s; taken here as
// up to 60 s, that never pages, and an outage past 2 minutes always
// does, within 5. (2 of 3 paged on about half of 30 s failovers: those
// straddling a minute boundary.)
func TestFailoverDoesNotPage(t *testing.T) {
	_, js := synth(t, small)
	for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
		id := strings.TrimRight(r.ID, "0123456789ABCDEF")
		if id != "FailOpenAlarm" && id != "BreakerOpenAlarm" {
			continue
		}
		m, n := int(num(r.Props["DatapointsToAlarm"])), int(num(r.Props["EvaluationPeriods"]))
		metrics, _ := json.Marshal(r.Props["Metrics"])
		if !strings.Contains(string(metrics), `"Period":60`) {
			t.Errorf("%s: metrics %s, want 1-minute periods", id, metrics)
		}
		// pages reports whether an outage of d seconds starting at second
		// start breaches m of the last n minutes at any minute's end.
		pages := func(start, d int) bool {
			breach := make([]bool, 12)
			for s := start; s < start+d; s++ {
				breach[s/60] = true
			}
			for end := range breach {
				k := 0
				for i := max(0, end-n+1); i <= end; i++ {
					if breach[i] {
						k++
					}
				}
				if k >= m {
					return true
				}
			}
			return false
		}
		for start := 60; start < 120; start++ {
			for _, d := range []int{1, 30, 31, 45, 60} {
				if pages(start, d) {
					t.Errorf("%s (%d of %d): a %d s failover starting at second %d pages", id, m, n, d, start%60)
				}
			}
			for _, d := range []int{121, 180, 300} {
				if !pages(start, d) {
					t.Errorf("%s (%d of %d): a %d s outage starting at second %d does not page", id, m, n, d, start%60)
				}
			}
		}
	}
}

// TestStartFailureFilters feeds the authorizer's start-failure metric
// filter, as synthesized, the lines Lambda writes in the function's log
// format: production's Text and small's JSON (SystemLogLevel WARN). Each
// failure (an init that timed out or exited, a process exit, an
// invocation that timed out) matches; a healthy start, invocation, a
// REST authorizer's 401 (a handler error) and the function's own lines do
// not. The lines are Lambda's formats ("Lambda execution environment
// lifecycle", the Telemetry API's platform.initReport, platform.runtimeDone
// and platform.report records); the pattern language's subset is
// evaluated by matchFilter.
func TestStartFailureFilters(t *testing.T) {
	const (
		slogLine = `{"time":"2026-12-07T10:00:00.1Z","level":"INFO","msg":"decision","decision":"allow","ruleId":"r1"}`
		emfLine  = `{"_aws":{"Timestamp":1796637600000,"CloudWatchMetrics":[{"Namespace":"Sluice","Dimensions":[["Function"]],"Metrics":[{"Name":"FailOpen"}]}]},"Function":"a","FailOpen":0}`
	)
	lines := map[variant]struct{ fail, ok []string }{
		full: {
			fail: []string{
				"INIT_REPORT Init Duration: 10000.12 ms\tPhase: init\tStatus: timeout",
				"INIT_REPORT Init Duration: 41.30 ms\tPhase: init\tStatus: error\tError Type: Runtime.ExitError",
				"RequestId: 4f6b0c3e-1d2a-4b7e-9c1a-0a1b2c3d4e5f Error: Runtime exited with error: exit status 1\nRuntime.ExitError",
				"2026-12-07T10:00:10.000Z 4f6b0c3e-1d2a-4b7e-9c1a-0a1b2c3d4e5f Task timed out after 10.00 seconds",
			},
			ok: []string{
				"INIT_START Runtime Version: provided:al2023.v95\tRuntime Version ARN: arn:aws:lambda:eu-west-1::runtime:abc",
				"START RequestId: 4f6b0c3e-1d2a-4b7e-9c1a-0a1b2c3d4e5f Version: $LATEST",
				"REPORT RequestId: 4f6b0c3e-1d2a-4b7e-9c1a-0a1b2c3d4e5f\tDuration: 2.10 ms\tBilled Duration: 3 ms\tMemory Size: 512 MB\tMax Memory Used: 30 MB\tInit Duration: 80.00 ms",
				`{"errorMessage":"Unauthorized","errorType":"errorString"}`,
				slogLine, emfLine,
			},
		},
		small: {
			fail: []string{
				`{"time":"2026-12-07T10:00:10.000Z","type":"platform.initReport","record":{"initializationType":"on-demand","phase":"init","status":"timeout","metrics":{"durationMs":10000.12}}}`,
				`{"time":"2026-12-07T10:00:00.041Z","type":"platform.initReport","record":{"initializationType":"on-demand","phase":"init","status":"error","errorType":"Runtime.ExitError","metrics":{"durationMs":41.3}}}`,
				`{"time":"2026-12-07T10:00:00.050Z","type":"platform.runtimeDone","record":{"requestId":"4f6b0c3e","status":"error","errorType":"Runtime.ExitError"}}`,
				`{"time":"2026-12-07T10:00:10.000Z","type":"platform.report","record":{"requestId":"4f6b0c3e","metrics":{"durationMs":10000.0,"billedDurationMs":10000,"memorySizeMB":256,"maxMemoryUsedMB":30},"status":"timeout"}}`,
			},
			ok: []string{
				`{"time":"2026-12-07T10:00:00.080Z","type":"platform.initReport","record":{"initializationType":"on-demand","phase":"init","status":"success","metrics":{"durationMs":80.0}}}`,
				`{"time":"2026-12-07T10:00:00.083Z","type":"platform.report","record":{"requestId":"4f6b0c3e","metrics":{"durationMs":2.1,"billedDurationMs":3,"memorySizeMB":256,"maxMemoryUsedMB":30},"status":"success"}}`,
				`{"time":"2026-12-07T10:00:00.083Z","type":"platform.runtimeDone","record":{"requestId":"4f6b0c3e","status":"error","errorType":"errorString"}}`,
				`{"timestamp":"2026-12-07T10:00:00.082Z","level":"ERROR","message":"Unauthorized","errorType":"errorString","requestId":"4f6b0c3e"}`,
				slogLine, emfLine, "not JSON at all: Runtime.ExitError",
			},
		},
	}
	for v, want := range lines {
		_, js := synth(t, v)
		fn := logicalIDOr(js, "AWS::Lambda::Function", "AuthorizerFunction")
		group := fmt.Sprint(refs(js["Resources"].(map[string]any)[fn].(map[string]any)["Properties"].(map[string]any)["LoggingConfig"].(map[string]any)["LogGroup"]))
		var pattern string
		for _, f := range resources(js, "AWS::Logs::MetricFilter") {
			if fmt.Sprint(refs(f.Props["LogGroupName"])) == group && strings.HasPrefix(f.ID, "AuthorizerStartFailures") {
				pattern, _ = f.Props["FilterPattern"].(string)
			}
		}
		if pattern == "" {
			t.Errorf("%s: no AuthorizerStartFailures filter on the authorizer's log group %s", v, group)
			continue
		}
		for _, l := range want.fail {
			if ok, err := matchFilter(pattern, l); !ok || err != nil {
				t.Errorf("%s: filter %s on\n\t%s\n= %v, %v; want a match", v, pattern, l, ok, err)
			}
		}
		for _, l := range want.ok {
			if ok, err := matchFilter(pattern, l); ok || err != nil {
				t.Errorf("%s: filter %s on\n\t%s\n= %v, %v; want none", v, pattern, l, ok, err)
			}
		}
	}
}

// matchFilter evaluates a CloudWatch Logs filter pattern on one log
// event, for the two forms the stacks write: terms joined by OR
// (?"a" ?"b": the event contains one, case-sensitively), and a JSON
// pattern of $.selector = or != "string", && and || and parentheses (an
// event that is no JSON object, or lacks the selected field, matches no
// comparison).
func matchFilter(pattern, event string) (bool, error) {
	if !strings.HasPrefix(pattern, "{") {
		terms := regexp.MustCompile(`\?"([^"]*)"`).FindAllStringSubmatch(pattern, -1)
		if len(terms) == 0 || strings.TrimSpace(regexp.MustCompile(`\?"[^"]*"`).ReplaceAllString(pattern, "")) != "" {
			return false, fmt.Errorf("term pattern %q: want ?\"term\" ...", pattern)
		}
		for _, tm := range terms {
			if strings.Contains(event, tm[1]) {
				return true, nil
			}
		}
		return false, nil
	}
	toks := regexp.MustCompile(`\s*(\|\||&&|!=|=|\(|\)|\{|\}|"[^"]*"|\$[.\w]+)`).FindAllStringSubmatch(pattern, -1)
	var ts []string
	for _, tk := range toks {
		ts = append(ts, tk[1])
	}
	if strings.Join(ts, "") != strings.Join(strings.Fields(pattern), "") || len(ts) < 2 || ts[0] != "{" || ts[len(ts)-1] != "}" {
		return false, fmt.Errorf("JSON pattern %q: tokens %q", pattern, ts)
	}
	var doc map[string]any
	_ = json.Unmarshal([]byte(event), &doc)
	ts = ts[1 : len(ts)-1]
	var or func() (bool, error)
	field := func(sel string) (string, bool) {
		var v any = doc
		for _, k := range strings.Split(strings.TrimPrefix(sel, "$."), ".") {
			m, ok := v.(map[string]any)
			if !ok {
				return "", false
			}
			v = m[k]
		}
		s, ok := v.(string)
		return s, ok
	}
	primary := func() (bool, error) {
		if len(ts) > 0 && ts[0] == "(" {
			ts = ts[1:]
			b, err := or()
			if err != nil || len(ts) == 0 || ts[0] != ")" {
				return false, cmp.Or(err, fmt.Errorf("JSON pattern %q: unbalanced (", pattern))
			}
			ts = ts[1:]
			return b, nil
		}
		if len(ts) < 3 || !strings.HasPrefix(ts[0], "$.") || (ts[1] != "=" && ts[1] != "!=") || !strings.HasPrefix(ts[2], `"`) {
			return false, fmt.Errorf("JSON pattern %q: want $.field = \"value\" at %q", pattern, ts)
		}
		got, ok := field(ts[0])
		eq := got == strings.Trim(ts[2], `"`)
		b := ok && (eq == (ts[1] == "="))
		ts = ts[3:]
		return b, nil
	}
	and := func() (bool, error) {
		b, err := primary()
		for err == nil && len(ts) > 0 && ts[0] == "&&" {
			ts = ts[1:]
			var c bool
			c, err = primary()
			b = b && c
		}
		return b, err
	}
	or = func() (bool, error) {
		b, err := and()
		for err == nil && len(ts) > 0 && ts[0] == "||" {
			ts = ts[1:]
			var c bool
			c, err = and()
			b = b || c
		}
		return b, err
	}
	b, err := or()
	if err == nil && len(ts) > 0 {
		err = fmt.Errorf("JSON pattern %q: left over %q", pattern, ts)
	}
	return b, err
}

// TestAlarmsDocumented: docs/deploy.md's alarm table names every alarm
// the production stack makes, so a new one gets its row.
func TestAlarmsDocumented(t *testing.T) {
	_, js := synth(t, full)
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "### Alarms")
	table, _, _ = strings.Cut(table, "\n### ")
	for _, r := range resources(js, "AWS::CloudWatch::Alarm") {
		if id := strings.TrimRight(r.ID, "0123456789ABCDEF"); !strings.Contains(table, "`"+id+"`") {
			t.Errorf("docs/deploy.md's alarm table has no row for %s", id)
		}
	}
}
