package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"

	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/rules"
)

type verifyCmd struct {
	Outputs string        `placeholder:"FILE" help:"The stack's cdk deploy --outputs-file."`
	Stack   string        `default:"Sluice" help:"Stack name in --outputs."`
	Local   string        `placeholder:"URL" help:"Verify sluice local at URL instead."`
	Token   string        `envvar:"SLUICE_ADMIN_TOKEN" help:"Bearer token of sluice local's admin API."`
	Region  string        `help:"AWS region (default: the URLs', then AWS_REGION)."`
	Within  time.Duration `default:"3s" help:"How soon a written rule must bind."`
	Timeout time.Duration `default:"30s" help:"Timeout of each HTTP request."`
}

func (cmd *verifyCmd) Help() string {
	return `Checks a deployment end to end, after cdk deploy: the admin API refuses an
unsigned request and accepts a signed one; a rule written through it binds
the demo API's next requests within --within (200, then 429 with
Retry-After, RateLimit and RateLimit-Policy), and no request with a subject
gets 401; the check API answers; every alarm of the stack notifies its
topic. The rule it writes and its subject's buckets are removed afterwards.
Prints a table; exits 1 when any check fails.

  npx cdk deploy Sluice --outputs-file sluice.json && sluice verify --outputs sluice.json
  sluice verify --local http://127.0.0.1:8080     # against sluice local`
}

// verifyTarget is what verify talks to.
type verifyTarget struct {
	demo, admin  string // URLs, without a trailing slash; the check API is admin/check
	api          string // the demo API's id, as rules name it
	stack, topic string // for the alarms; empty locally
	token        string // local admin token; empty when signing
}

// verifyResult is one row of the table.
type verifyResult struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Skip   bool   `json:"skipped,omitempty"`
	Detail string `json:"detail"`
}

func (cmd *verifyCmd) target() (verifyTarget, error) {
	switch {
	case cmd.Local != "" && cmd.Outputs != "":
		return verifyTarget{}, usageErrorf("give --local or --outputs, not both")
	case cmd.Local != "":
		base := strings.TrimRight(cmd.Local, "/")
		if cmd.Token == "" {
			return verifyTarget{}, usageErrorf("--local needs the admin token: set SLUICE_ADMIN_TOKEN or pass --token")
		}
		return verifyTarget{demo: base, admin: base + "/admin", api: "demo", token: cmd.Token}, nil
	case cmd.Outputs != "":
		b, err := os.ReadFile(cmd.Outputs)
		if err != nil {
			return verifyTarget{}, err
		}
		var all map[string]map[string]string
		if err := json.Unmarshal(b, &all); err != nil {
			return verifyTarget{}, fmt.Errorf("%s: %w", cmd.Outputs, err)
		}
		out, ok := all[cmd.Stack]
		if !ok {
			return verifyTarget{}, fmt.Errorf("%s has no stack %q (pass --stack)", cmd.Outputs, cmd.Stack)
		}
		t := verifyTarget{
			demo: strings.TrimRight(out["DemoApiUrl"], "/"), admin: strings.TrimRight(out["AdminApiUrl"], "/"),
			stack: cmd.Stack, topic: out["AlarmTopicArn"],
		}
		if t.admin == "" || t.demo == "" {
			return verifyTarget{}, fmt.Errorf("%s: stack %s has no AdminApiUrl or DemoApiUrl output (verify needs the demo API: deploy without -c demoApi=false)", cmd.Outputs, cmd.Stack)
		}
		u, err := url.Parse(t.demo)
		if err != nil {
			return verifyTarget{}, fmt.Errorf("DemoApiUrl %q: %w", t.demo, err)
		}
		t.api, _, _ = strings.Cut(u.Hostname(), ".") // <api id>.execute-api.<region>.amazonaws.com
		return t, nil
	}
	return verifyTarget{}, usageErrorf("give --outputs FILE (cdk deploy --outputs-file) or --local URL")
}

// Run checks the deployment and prints the table.
func (cmd *verifyCmd) Run(e *env) error {
	t, err := cmd.target()
	if err != nil {
		return err
	}
	v := &verifier{e: e, cmd: cmd, t: t, http: &http.Client{Timeout: cmd.Timeout}}
	res := v.run()
	failed := slices.ContainsFunc(res, func(r verifyResult) bool { return !r.OK && !r.Skip })
	if err := e.print(res, func() {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
		for _, r := range res {
			result := "ok"
			switch {
			case r.Skip:
				result = "skip"
			case !r.OK:
				result = "FAIL"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Check, result, r.Detail)
		}
		tw.Flush()
	}); err != nil {
		return err
	}
	if failed {
		return exitError{code: exitFailure, msg: "some checks failed"}
	}
	return nil
}

type verifier struct {
	e    *env
	cmd  *verifyCmd
	t    verifyTarget
	http *http.Client
	res  []verifyResult
	// What to remove once the checks are done: the rule written, with the
	// client that wrote it, and its subject.
	c       *adminclient.Client
	rule    rules.Rule
	subject string
}

func (v *verifier) add(check string, err error, detail string, args ...any) {
	d := fmt.Sprintf(detail, args...)
	if err != nil {
		d = err.Error()
	}
	v.res = append(v.res, verifyResult{Check: check, OK: err == nil, Detail: d})
}

func (v *verifier) skip(check, detail string) {
	v.res = append(v.res, verifyResult{Check: check, Skip: true, Detail: detail})
}

// run does every check in order, then removes what it wrote.
func (v *verifier) run() []verifyResult {
	v.checks()
	if v.c != nil && v.rule.ID != "" {
		v.cleanup(v.c, v.rule, v.subject)
	}
	return v.res
}

// checks does every check in order; a check that the next ones need stops
// them (each then reported as not run).
func (v *verifier) checks() {
	ctx := v.e.ctx
	// 1. Unsigned: refused.
	resp, err := v.do(ctx, http.MethodGet, v.t.admin+"/rules", nil, nil)
	if err == nil && resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		err = fmt.Errorf("GET /rules without credentials = %d, want 401 or 403", resp.StatusCode)
	}
	v.add("admin API refuses an unsigned request", err, "GET /rules: %d", status(resp))

	// 2. Signed (or with the token): accepted.
	c, err := adminclient.New(ctx, adminclient.Options{Endpoint: v.t.admin, Token: v.t.token, Region: v.cmd.Region, Timeout: v.cmd.Timeout})
	if err == nil {
		var page rules.Page
		_, err = c.GetJSON(ctx, "/rules", nil, &page)
	}
	how := "SigV4"
	if v.t.token != "" {
		how = "bearer token"
	}
	v.add("admin API accepts a "+how+" request", err, "GET /rules: 200")
	if err != nil {
		v.notRun("rule binds the demo API", "check API answers")
		return
	}

	// 3. A rule for a subject of its own binds the demo API's next requests.
	subject := fmt.Sprintf("sluice-verify-%d", time.Now().UnixNano())
	limit := int64(1)
	rule := rules.Rule{
		API: v.t.api, Route: "GET /hello", Subject: subject, Limit: &limit, Period: rules.Period(time.Hour),
		Description: "sluice verify: removed when it finishes",
	}
	var created rules.Rule
	written := time.Now()
	if err := c.SendJSON(ctx, http.MethodPost, "/rules", rule, 0, &created); err != nil {
		v.add("rule written", err, "")
		v.notRun("rule binds the demo API", "check API answers")
		return
	}
	v.add("rule written", nil, "POST /rules: %s (1 per hour for %s on GET /hello)", created.ID, subject)
	v.c, v.rule, v.subject = c, created, subject
	v.binds(ctx, created, subject, written)

	// 4. The check API.
	var dec struct {
		Allowed *bool  `json:"allowed"`
		Rule    string `json:"rule"`
	}
	body := map[string]any{"subject": subject + "-check", "api": v.t.api, "route": "GET /hello"}
	cr, err := c.Do(ctx, http.MethodPost, "/check", nil, body, 0)
	if err == nil {
		err = json.Unmarshal(cr.Body, &dec)
	}
	if err == nil && dec.Allowed == nil {
		err = fmt.Errorf("POST /check = %.200s, want a decision", cr.Body)
	}
	v.add("check API answers", err, "POST /check: allowed=%v", dec.Allowed != nil && *dec.Allowed)

	// 5. The alarms.
	v.alarms(ctx)
}

// binds sends GET /hello as subject until the rule's 429, within the bound.
func (v *verifier) binds(ctx context.Context, r rules.Rule, subject string, written time.Time) {
	var first, denied *http.Response
	var got []int
	deadline := written.Add(v.cmd.Within)
	var err error
	for {
		resp, rerr := v.do(ctx, http.MethodGet, v.t.demo+"/hello", map[string]string{"x-api-key": subject}, nil)
		if rerr != nil {
			err = rerr
			break
		}
		got = append(got, resp.StatusCode)
		if first == nil && resp.StatusCode == http.StatusOK {
			first = resp
		}
		if resp.StatusCode == http.StatusTooManyRequests && strings.Contains(resp.Header.Get("RateLimit-Policy"), `"`+r.ID+`"`) {
			denied = resp
			break
		}
		if time.Now().After(deadline) {
			break
		}
		// 5 a second: under the demo API's throttle (10 a second, burst
		// 20), and a version poll (1 s) is several tries.
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(written).Round(10 * time.Millisecond)
	if err == nil && slices.Contains(got, http.StatusUnauthorized) {
		err = fmt.Errorf("answers %v: a request with a subject got 401", got)
	}
	v.add("no request with a subject gets 401", err, "answers %v", got)

	err = nil
	switch {
	case first == nil:
		err = fmt.Errorf("answers %v: no 200 before the rule's 429", got)
	case first.Header.Get("RateLimit") == "" || first.Header.Get("RateLimit-Policy") == "":
		err = fmt.Errorf("200 without RateLimit or RateLimit-Policy (headers %v): the authorizer context's header mapping is missing", first.Header)
	}
	v.add("200 with RateLimit, RateLimit-Policy", err, "RateLimit: %s", header(first, "RateLimit"))

	err = nil
	switch {
	case denied == nil:
		err = fmt.Errorf("no 429 of rule %s within %v of writing it (answers %v)", r.ID, v.cmd.Within, got)
	case denied.Header.Get("Retry-After") == "" || denied.Header.Get("RateLimit") == "":
		err = fmt.Errorf("429 without Retry-After or RateLimit (headers %v)", denied.Header)
	}
	v.add("rule binds the demo API", err, "429 after %v, Retry-After: %s", took, header(denied, "Retry-After"))
}

// alarms checks that every alarm of the stack notifies its topic.
func (v *verifier) alarms(ctx context.Context) {
	const check = "alarms notify the topic"
	if v.t.stack == "" {
		v.skip(check, "sluice local has no alarms")
		return
	}
	if v.t.topic == "" {
		v.skip(check, "no AlarmTopicArn output (-c alarmTopicArn= names a topic of yours)")
		return
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if u, perr := url.Parse(v.t.admin); err == nil && perr == nil {
		if r, ok := adminclient.ExecuteAPIRegion(u.Hostname()); ok {
			cfg.Region = r
		}
	}
	if v.cmd.Region != "" {
		cfg.Region = v.cmd.Region
	}
	if err != nil {
		v.add(check, err, "")
		return
	}
	cw := cloudwatch.NewFromConfig(cfg)
	var n int
	var bad []string
	p := cloudwatch.NewDescribeAlarmsPaginator(cw, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: &v.t.stack})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			v.add(check, fmt.Errorf("describe alarms %s-*: %w", v.t.stack, err), "")
			return
		}
		for _, a := range page.MetricAlarms {
			n++
			if !slices.Contains(a.AlarmActions, v.t.topic) {
				bad = append(bad, *a.AlarmName)
			}
		}
	}
	switch {
	case n == 0:
		err = fmt.Errorf("no alarm named %s-*", v.t.stack)
	case bad != nil:
		err = fmt.Errorf("%d of %d alarms do not notify %s: %v", len(bad), n, v.t.topic, bad)
	}
	v.add(check, err, "%d alarms notify %s", n, v.t.topic)
}

// cleanup removes the rule and the subject's buckets, and says so.
func (v *verifier) cleanup(c *adminclient.Client, r rules.Rule, subject string) {
	ctx := context.WithoutCancel(v.e.ctx)
	err := c.SendJSON(ctx, http.MethodDelete, "/rules/"+url.PathEscape(r.ID), nil, r.Version, nil)
	if err == nil {
		for _, s := range []string{subject, subject + "-check"} {
			if _, rerr := c.Do(ctx, http.MethodDelete, "/subjects/"+url.PathEscape(s)+"/buckets", nil, nil, 0); rerr != nil {
				err = errors.Join(err, fmt.Errorf("reset subject %s: %w", s, rerr))
			}
		}
	}
	if err == nil {
		if _, gerr := c.GetJSON(ctx, "/rules/"+url.PathEscape(r.ID), nil, &rules.Rule{}); !isNotFound(gerr) {
			err = fmt.Errorf("rule %s still there after DELETE: %v", r.ID, gerr)
		}
	}
	v.add("test rule and subjects removed", err, "rule %s deleted, buckets of %s reset", r.ID, subject)
}

func (v *verifier) notRun(checks ...string) {
	for _, c := range checks {
		v.res = append(v.res, verifyResult{Check: c, Detail: "not run: an earlier check failed"})
	}
}

// do sends one request without admin credentials and reads the answer.
func (v *verifier) do(ctx context.Context, method, target string, hdr map[string]string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, val := range hdr {
		req.Header.Set(k, val)
	}
	resp, err := v.http.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

func status(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

func header(r *http.Response, k string) string {
	if r == nil {
		return "-"
	}
	return r.Header.Get(k)
}
