// Package insights answers the admin API's GET /stats on AWS from the
// CloudWatch Contributor Insights rules the reference stack creates over
// the authorizer's decision log lines (internal/authorizer's
// logDecision): the same stats.Report sluice local builds from its
// in-process counters.
//
// Contributor Insights sees only what is logged: denials, shadow denials,
// fail-opens and failures, not allowed requests, so RuleStat.Allowed is
// absent.
package insights

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/sluicehq/sluice/internal/stats"
)

// The rule name suffixes; each rule is named <prefix><suffix>. The stack
// (infra/) creates the rules with these names and grants the admin stats
// function GetInsightRuleReport on exactly them.
const (
	// SuffixDeniedSubjects counts denials by principalId (the subject
	// hash), ruleId and api.
	SuffixDeniedSubjects = "-denied-subjects"
	// SuffixLimitingRules counts denials and shadow denials by ruleId,
	// api and decision.
	SuffixLimitingRules = "-limiting-rules"
	// SuffixFailOpenRules counts fail-opens by ruleId and api.
	SuffixFailOpenRules = "-fail-open-rules"
	// SuffixShownSubjects counts denials by principalId and subject, of
	// the lines that carry a subject as sent (SUBJECT_SHOW: an identity,
	// never a credential): it names the hashes of the denied subjects
	// rule as the decision log line did. A rule of its own rather than a
	// fourth key of the denied subjects rule, which would count no line
	// without "subject" (every line when SUBJECT_SHOW is unset).
	SuffixShownSubjects = "-shown-subjects"
)

// RuleNames returns the four rule names for prefix, in the order of the
// suffixes above.
func RuleNames(prefix string) []string {
	return []string{prefix + SuffixDeniedSubjects, prefix + SuffixLimitingRules, prefix + SuffixFailOpenRules, prefix + SuffixShownSubjects}
}

// MaxWindow is the longest window answered.
const MaxWindow = 24 * time.Hour

// DefaultTimeout bounds one report (its four calls run at once).
const DefaultTimeout = 5 * time.Second

// reportAPI is the one CloudWatch call made (*cloudwatch.Client).
type reportAPI interface {
	GetInsightRuleReport(ctx context.Context, in *cloudwatch.GetInsightRuleReportInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.GetInsightRuleReportOutput, error)
}

// Options configure a Reader.
type Options struct {
	// Prefix starts the four rule names (see RuleNames); required.
	Prefix string
	// Timeout bounds one report; default DefaultTimeout (5s).
	Timeout time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Reader builds reports from the Contributor Insights rules.
type Reader struct {
	api reportAPI
	o   Options
}

// New returns a Reader calling api (a *cloudwatch.Client).
func New(api reportAPI, o Options) *Reader {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reader{api: api, o: o}
}

// Load returns a Reader of the rules named after prefix, with a CloudWatch
// client from the default AWS configuration (the function's role on
// Lambda; AWS_REGION, AWS_ENDPOINT_URL honoured). It makes no call.
func Load(ctx context.Context, prefix string) (*Reader, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	return New(cloudwatch.NewFromConfig(cfg), Options{Prefix: prefix}), nil
}

// MaxWindow is the longest window TopContributors answers (24h).
func (r *Reader) MaxWindow() time.Duration { return MaxWindow }

// period picks the series step for a window: at most 60 points.
func period(window time.Duration) time.Duration {
	for _, p := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour} {
		if window/p <= 60 {
			return p
		}
	}
	return time.Hour
}

// TopContributors reports the top n denied subjects and limiting rules over
// the last window, asking the four rules at once.
func (r *Reader) TopContributors(ctx context.Context, window time.Duration, n int) (stats.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
	defer cancel()
	step := period(window)
	end := r.o.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-window)
	names := RuleNames(r.o.Prefix)
	// The limiting-rules rule splits each rule by decision: ask for more
	// contributors so n rules survive the merge; the shown subjects rule
	// ranks hashes by their total over rules and apis, not as the denied
	// subjects rule does: ask for more so the listed ones are among them.
	counts := []int{n, min(3*n, 100), n, min(3*n, 100)}
	outs := make([]*cloudwatch.GetInsightRuleReportOutput, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			outs[i], errs[i] = r.api.GetInsightRuleReport(ctx, &cloudwatch.GetInsightRuleReportInput{
				RuleName:            aws.String(name),
				StartTime:           aws.Time(start),
				EndTime:             aws.Time(end),
				Period:              aws.Int32(int32(step / time.Second)),
				MaxContributorCount: aws.Int32(int32(counts[i])),
				Metrics:             []string{"Sum"},
				OrderBy:             aws.String("Sum"),
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("contributor insights rule %s: %w", name, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return stats.Report{}, err
	}
	denied, limiting, failOpen, shownRule := outs[0], outs[1], outs[2], outs[3]

	// hash → subject as sent; a hash is of its subject, so one subject
	// each (the first, the most denied, should two ever appear).
	shown := map[string]string{}
	for _, c := range shownRule.Contributors {
		if len(c.Keys) < 2 || c.Keys[0] == "" || c.Keys[1] == "" {
			continue
		}
		if _, ok := shown[c.Keys[0]]; !ok {
			shown[c.Keys[0]] = c.Keys[1]
		}
	}

	rep := stats.Report{
		Source: "contributor-insights", Window: window.String(), Step: step.String(),
		From: start, To: end, Rules: []stats.RuleStat{}, Subjects: []stats.SubjectStat{},
	}
	for _, c := range denied.Contributors {
		if len(c.Keys) < 3 {
			continue
		}
		rep.Subjects = append(rep.Subjects, stats.SubjectStat{Subject: c.Keys[0], Shown: shown[c.Keys[0]], Rule: c.Keys[1], API: c.Keys[2], Denied: value(c)})
	}
	stats.SortSubjects(rep.Subjects)

	type key struct{ rule, api string }
	byRule := map[key]*stats.RuleStat{}
	get := func(rule, api string) *stats.RuleStat {
		k := key{rule, api}
		if byRule[k] == nil {
			byRule[k] = &stats.RuleStat{Rule: rule, API: api}
		}
		return byRule[k]
	}
	for _, c := range limiting.Contributors {
		if len(c.Keys) < 3 {
			continue
		}
		rs := get(c.Keys[0], c.Keys[1])
		if c.Keys[2] == "shadow-deny" {
			rs.ShadowDenied += value(c)
		} else {
			rs.Denied += value(c)
		}
	}
	for _, c := range failOpen.Contributors {
		if len(c.Keys) < 2 {
			continue
		}
		get(c.Keys[0], c.Keys[1]).FailOpen += value(c)
	}
	for _, rs := range byRule {
		rep.Rules = append(rep.Rules, *rs)
	}
	stats.SortRules(rep.Rules)
	rep.Rules = rep.Rules[:min(n, len(rep.Rules))]

	// The series: denials from the subjects rule, shadow denials as what
	// the limiting-rules rule counted beyond them, fail-opens.
	for t := start; t.Before(end); t = t.Add(step) {
		rep.Series = append(rep.Series, stats.Point{Time: t})
	}
	add := func(ds []types.InsightRuleMetricDatapoint, field func(*stats.Point) *int64) {
		for _, d := range ds {
			if d.Timestamp == nil {
				continue
			}
			if i := int(d.Timestamp.Sub(start) / step); i >= 0 && i < len(rep.Series) {
				*field(&rep.Series[i]) += int64(math.Round(aws.ToFloat64(d.Sum)))
			}
		}
	}
	add(denied.MetricDatapoints, func(p *stats.Point) *int64 { return &p.Denied })
	add(limiting.MetricDatapoints, func(p *stats.Point) *int64 { return &p.ShadowDenied })
	add(failOpen.MetricDatapoints, func(p *stats.Point) *int64 { return &p.FailOpen })
	for i := range rep.Series {
		p := &rep.Series[i]
		p.ShadowDenied = max(0, p.ShadowDenied-p.Denied)
	}
	return rep, nil
}

func value(c types.InsightRuleContributor) int64 {
	return int64(math.Round(aws.ToFloat64(c.ApproximateAggregateValue)))
}
