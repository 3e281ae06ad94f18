package insights

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/stats"
)

// fakeCloudWatch answers GetInsightRuleReport from canned outputs per rule
// name and records the inputs.
type fakeCloudWatch struct {
	mu    sync.Mutex
	out   map[string]*cloudwatch.GetInsightRuleReportOutput
	err   error
	delay time.Duration
	in    []*cloudwatch.GetInsightRuleReportInput
}

func (f *fakeCloudWatch) GetInsightRuleReport(ctx context.Context, in *cloudwatch.GetInsightRuleReportInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetInsightRuleReportOutput, error) {
	f.mu.Lock()
	f.in = append(f.in, in)
	f.mu.Unlock()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	if o := f.out[*in.RuleName]; o != nil {
		return o, nil
	}
	return &cloudwatch.GetInsightRuleReportOutput{}, nil
}

func contributor(v float64, keys ...string) types.InsightRuleContributor {
	return types.InsightRuleContributor{Keys: keys, ApproximateAggregateValue: aws.Float64(v)}
}

func point(t time.Time, v float64) types.InsightRuleMetricDatapoint {
	return types.InsightRuleMetricDatapoint{Timestamp: aws.Time(t), Sum: aws.Float64(v)}
}

var now = time.Date(2026, 12, 1, 10, 4, 30, 0, time.UTC)

func TestTopContributors(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f := &fakeCloudWatch{out: map[string]*cloudwatch.GetInsightRuleReportOutput{
		"sl-denied-subjects": {
			Contributors:     []types.InsightRuleContributor{contributor(7, "h2", "r1", "demo"), contributor(9, "h1", "r1", "demo")},
			MetricDatapoints: []types.InsightRuleMetricDatapoint{point(start.Add(time.Minute), 16)},
		},
		"sl-limiting-rules": {
			Contributors: []types.InsightRuleContributor{
				contributor(16, "r1", "demo", "deny"), contributor(4, "r1", "demo", "shadow-deny"), contributor(2, "r2", "demo", "shadow-deny"),
			},
			MetricDatapoints: []types.InsightRuleMetricDatapoint{point(start.Add(time.Minute), 22)},
		},
		"sl-fail-open-rules": {
			Contributors:     []types.InsightRuleContributor{contributor(3, "r2", "demo")},
			MetricDatapoints: []types.InsightRuleMetricDatapoint{point(start.Add(2*time.Minute), 3)},
		},
	}}
	r := New(f, Options{Prefix: "sl", Now: func() time.Time { return now }})
	rep, err := r.TopContributors(context.Background(), 5*time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := stats.Report{
		Source: "contributor-insights", Window: "5m0s", Step: "1m0s", From: start, To: start.Add(5 * time.Minute),
		Rules: []stats.RuleStat{
			{Rule: "r1", API: "demo", Denied: 16, ShadowDenied: 4},
			{Rule: "r2", API: "demo", ShadowDenied: 2, FailOpen: 3},
		},
		Subjects: []stats.SubjectStat{{Subject: "h1", Rule: "r1", API: "demo", Denied: 9}, {Subject: "h2", Rule: "r1", API: "demo", Denied: 7}},
		Series: []stats.Point{
			{Time: start}, {Time: start.Add(time.Minute), Denied: 16, ShadowDenied: 6},
			{Time: start.Add(2 * time.Minute), FailOpen: 3}, {Time: start.Add(3 * time.Minute)}, {Time: start.Add(4 * time.Minute)},
		},
	}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Errorf("TopContributors(5m) differs (-want +got):\n%s", diff)
	}
	if len(f.in) != 4 {
		t.Fatalf("%d calls, want 4", len(f.in))
	}
	for _, in := range f.in {
		if !in.StartTime.Equal(start) || !in.EndTime.Equal(start.Add(5*time.Minute)) || *in.Period != 60 || *in.OrderBy != "Sum" {
			t.Errorf("input for %s: %v..%v period %d order %s", *in.RuleName, in.StartTime, in.EndTime, *in.Period, *in.OrderBy)
		}
	}
}

// TestTopContributorsShown: the shown subjects rule's report (Keys in the
// rule's order: principalId, subject) names the denied subjects' hashes as
// sent; a hash it does not name stays a hash alone, as does one with an
// empty subject.
func TestTopContributorsShown(t *testing.T) {
	t.Parallel()
	f := &fakeCloudWatch{out: map[string]*cloudwatch.GetInsightRuleReportOutput{
		"sl-denied-subjects": {Contributors: []types.InsightRuleContributor{
			contributor(9, "h1", "r1", "demo"), contributor(7, "h2", "r1", "demo"), contributor(5, "h1", "r2", "demo"),
			contributor(4, "h3", "r1", "demo"), contributor(2, "h4", "r1", "demo"),
		}},
		"sl-shown-subjects": {Contributors: []types.InsightRuleContributor{
			contributor(14, "h1", "customer-42"), contributor(7, "h2", "203.0.113.9"), contributor(1, "h4", ""),
			contributor(1, "h9", "not-listed"), contributor(1, "h1"),
		}},
	}}
	rep, err := New(f, Options{Prefix: "sl", Now: func() time.Time { return now }}).TopContributors(context.Background(), 5*time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []stats.SubjectStat{
		{Subject: "h1", Shown: "customer-42", Rule: "r1", API: "demo", Denied: 9},
		{Subject: "h2", Shown: "203.0.113.9", Rule: "r1", API: "demo", Denied: 7},
		{Subject: "h1", Shown: "customer-42", Rule: "r2", API: "demo", Denied: 5},
		{Subject: "h3", Rule: "r1", API: "demo", Denied: 4},
		{Subject: "h4", Rule: "r1", API: "demo", Denied: 2},
	}
	if diff := cmp.Diff(want, rep.Subjects); diff != "" {
		t.Errorf("subjects differ (-want +got):\n%s", diff)
	}
	for _, in := range f.in {
		if *in.RuleName == "sl-shown-subjects" && *in.MaxContributorCount != 30 {
			t.Errorf("shown subjects rule asked for %d contributors, want 30 (3n)", *in.MaxContributorCount)
		}
	}
}

func TestTopContributorsErrors(t *testing.T) {
	t.Parallel()
	f := &fakeCloudWatch{err: errors.New("AccessDeniedException")}
	_, err := New(f, Options{Prefix: "sl"}).TopContributors(context.Background(), time.Minute, 5)
	if err == nil || !strings.Contains(err.Error(), "sl-denied-subjects") {
		t.Errorf("TopContributors with a failing API = %v, want an error naming the rule", err)
	}
	slow := &fakeCloudWatch{delay: time.Second}
	start := time.Now()
	_, err = New(slow, Options{Prefix: "sl", Timeout: 50 * time.Millisecond}).TopContributors(context.Background(), time.Minute, 5)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 500*time.Millisecond {
		t.Errorf("slow API: err %v after %v, want DeadlineExceeded after about 50ms", err, time.Since(start))
	}
}

func TestPeriod(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ window, want time.Duration }{
		{time.Minute, time.Minute}, {time.Hour, time.Minute}, {2 * time.Hour, 5 * time.Minute}, {24 * time.Hour, time.Hour},
	} {
		if got := period(tt.window); got != tt.want {
			t.Errorf("period(%s) = %s, want %s", tt.window, got, tt.want)
		}
	}
}

// TestLoad builds a reader from the default AWS configuration without
// calling AWS (cold start of the admin-stats function).
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
	} {
		t.Setenv(k, v)
	}
	r, err := Load(context.Background(), "Sluice-sluice")
	if err != nil || r == nil || r.o.Prefix != "Sluice-sluice" || r.MaxWindow() != 24*time.Hour {
		t.Fatalf("Load = %+v, %v; want a reader of prefix Sluice-sluice", r, err)
	}
}
