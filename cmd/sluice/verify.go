package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/adminclient"
	"github.com/sluicehq/sluice/internal/rules"
)

type verifyCmd struct {
	Outputs    string        `placeholder:"FILE" help:"The stack's cdk deploy --outputs-file."`
	Stack      string        `default:"Sluice" help:"Stack name in --outputs."`
	Local      string        `placeholder:"URL" help:"Verify sluice local at URL instead."`
	Token      string        `envvar:"SLUICE_ADMIN_TOKEN" help:"Bearer token of sluice local's admin API."`
	Region     string        `help:"AWS region (default: the URLs', then AWS_REGION)."`
	Within     time.Duration `default:"3s" help:"How soon a written rule must bind."`
	Edge       bool          `help:"With --local: sluice local runs --edge; check it (a stack says so with its EdgeDomain output)."`
	EdgeWithin time.Duration `default:"3m" help:"How soon the edge must deny a blocked subject, and free it once unblocked."`
	Timeout    time.Duration `default:"30s" help:"Timeout of each HTTP request."`
}

func (cmd *verifyCmd) Help() string {
	return `Checks a deployment end to end, after cdk deploy: the admin API refuses an
unsigned request and accepts a signed one; a rule written through it binds
the demo API's next requests within --within (200 with RateLimit and
RateLimit-Policy, then 429 with Retry-After too), and no request with a
subject gets 401; the check API answers; a global rule's use moves the
ledger (a stack with one: the LedgerTable output), and Secrets Manager
has this Region's replica of the family's subject hash key in sync (in
the first Region: every replica); every alarm of the stack (named
<stack>-...) notifies its topic; behind the CDN edge (an EdgeDomain
output, or --local --edge), a subject blocked is denied by the edge
within --edge-within and freed once unblocked, and the API's own URL
refuses a request not through it. The rules it writes and their
subjects' buckets are removed afterwards.
Prints a table; exits 1 when any check fails.

  npx cdk deploy Sluice --outputs-file sluice.json && sluice verify --outputs sluice.json
  sluice verify --local http://127.0.0.1:8080     # against sluice local`
}

// verifyTarget is what verify talks to.
type verifyTarget struct {
	demo, admin  string // URLs, without a trailing slash; the check API is admin/check
	api          string // the demo API's id, as rules name it
	stack, topic string // for the alarms; empty locally
	// ledger is the LedgerTable output: the stack is one Region of a
	// family sharing global budgets. Empty for a regional stack, and
	// locally (where the answer tells).
	ledger string
	// subjectKey and regions are the SubjectKeyName and GlobalRegions
	// outputs of a family's stack: the key's secret, replicated from
	// regions[0] to the others. Empty for a regional stack.
	subjectKey string
	regions    []string
	token      string // local admin token; empty when signing
	// edge: the demo API is behind the CDN edge (demo is the
	// distribution's URL); direct is then the API's own, on AWS.
	edge   bool
	direct string
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
		return verifyTarget{demo: base, admin: base + "/admin", api: "demo", token: cmd.Token, edge: cmd.Edge}, nil
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
			stack: cmd.Stack, topic: out["AlarmTopicArn"], ledger: out["LedgerTable"], subjectKey: out["SubjectKeyName"],
		}
		if r := out["GlobalRegions"]; r != "" {
			t.regions = strings.Split(r, ",")
		}
		if t.admin == "" || t.demo == "" {
			return verifyTarget{}, fmt.Errorf("%s: stack %s has no AdminApiUrl or DemoApiUrl output (verify needs the demo API: deploy without -c demoApi=false)", cmd.Outputs, cmd.Stack)
		}
		u, err := url.Parse(t.demo)
		if err != nil {
			return verifyTarget{}, fmt.Errorf("DemoApiUrl %q: %w", t.demo, err)
		}
		t.api, _, _ = strings.Cut(u.Hostname(), ".") // <api id>.execute-api.<region>.amazonaws.com
		if d := out["EdgeDomain"]; d != "" {
			t.edge, t.direct, t.demo = true, t.demo, "https://"+d
		}
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
	// cw lists the stack's alarms; nil builds a CloudWatch client from
	// the AWS SDK's default chain.
	cw alarmLister
	// sm describes the subject key's primary secret, in regions[0]; nil
	// builds a Secrets Manager client there.
	sm secretDescriber
	// What to remove once the checks are done: the rules written (and
	// their subjects' buckets), and the client that wrote them.
	c       *adminclient.Client
	written []rules.Rule
}

// alarmLister is the CloudWatch call verify makes (cloudwatch.Client).
type alarmLister interface {
	DescribeAlarms(ctx context.Context, in *cloudwatch.DescribeAlarmsInput, opts ...func(*cloudwatch.Options)) (*cloudwatch.DescribeAlarmsOutput, error)
}

// secretDescriber is the Secrets Manager call verify makes
// (secretsmanager.Client).
type secretDescriber interface {
	DescribeSecret(ctx context.Context, in *secretsmanager.DescribeSecretInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error)
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

// run does every check in order, then removes what it wrote. The
// Region's replica of the subject key and the alarms are checked whatever
// the APIs answer: a failed replica is what makes them fail.
func (v *verifier) run() []verifyResult {
	ctx := v.e.ctx
	v.apiChecks(ctx)
	v.replica(ctx)
	v.alarms(ctx)
	if v.c != nil && len(v.written) > 0 {
		v.cleanup()
	}
	return v.res
}

// apiChecks does the checks through the APIs in order; a check that the
// next ones need stops them (each then reported as not run).
func (v *verifier) apiChecks(ctx context.Context) {
	// 1. Unsigned: refused.
	resp, err := v.get(ctx, v.t.admin+"/rules", "")
	if err == nil && resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		err = fmt.Errorf("GET /rules without credentials = %d, want 401 or 403", resp.StatusCode)
	}
	v.add("admin API refuses an unsigned request", err, "GET /rules: %d", status(resp))

	// 2. Signed (or with the token): accepted.
	c, err := adminclient.New(ctx, adminclient.Options{
		Endpoint: v.t.admin, Token: v.t.token, SigV4: v.t.token == "", Region: v.cmd.Region, Timeout: v.cmd.Timeout,
	})
	if err == nil {
		var page rules.Page
		err = c.GetJSON(ctx, "/rules", nil, &page)
	}
	how := "SigV4"
	if v.t.token != "" {
		how = "bearer token"
	}
	v.add("admin API accepts a "+how+" request", err, "GET /rules: 200")
	if err != nil {
		v.notRun("rule binds the demo API", "check API answers", globalCheck)
		return
	}

	// 3. A rule for a subject of its own binds the demo API's next requests.
	subject := fmt.Sprintf("sluice-verify-%d", time.Now().UnixNano())
	rule := rules.Rule{
		API: v.t.api, Route: "GET /hello", Subject: subject, Limit: new(int64(1)), Period: rules.Period(time.Hour),
		Description: "sluice verify: removed when it finishes",
	}
	written := time.Now()
	v.c = c
	created, err := v.write(ctx, rule)
	if err != nil {
		v.add("rule written", err, "")
		v.notRun("rule binds the demo API", "check API answers", globalCheck)
		return
	}
	v.add("rule written", nil, "POST /rules: %s (1 per hour for %s on GET /hello)", created.ID, subject)
	v.binds(ctx, created, written)

	// 4. The check API.
	var dec struct {
		Allowed *bool  `json:"allowed"`
		Rule    string `json:"rule"`
	}
	body := map[string]any{"subject": subject + "-check", "api": v.t.api, "route": "GET /hello"}
	cr, err := c.Do(ctx, http.MethodPost, "/check", nil, body, 0)
	if err == nil {
		err = json.Unmarshal(cr, &dec)
	}
	if err == nil && dec.Allowed == nil {
		err = fmt.Errorf("POST /check = %.200s, want a decision", cr)
	}
	v.add("check API answers", err, "POST /check: allowed=%v", dec.Allowed != nil && *dec.Allowed)

	// 5. A global rule's use reaches the ledger.
	v.global(ctx, subject+"-global")

	// 6. The CDN edge denies a blocked subject, and frees it (verify_edge.go).
	if v.t.edge {
		v.edgeChecks(ctx, subject+"-edge")
	}
}

const globalCheck = "global rule moves the ledger"

// write creates rule through the admin API, and has it removed when the
// checks are done.
func (v *verifier) write(ctx context.Context, rule rules.Rule) (rules.Rule, error) {
	var created rules.Rule
	if err := v.c.SendJSON(ctx, http.MethodPost, "/rules", rule, 0, &created); err != nil {
		return created, err
	}
	v.written = append(v.written, created)
	return created, nil
}

// poll calls try every every until it is done or fails, or deadline
// passes.
func poll(ctx context.Context, deadline time.Time, every time.Duration, try func() (done bool, err error)) error {
	for {
		done, err := try()
		if err != nil || done || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// global writes a global rule for subject and sends the demo API requests
// under it until the ledger's count of the window moves, within --within:
// the authorizer reached the ledger (its IAM grant, the VPC's DynamoDB
// endpoint, this Region's replica) and named the budget with the subject
// key every Region shares. Without that, global decisions fall back to the
// rule's failure mode and every other check still passes.
func (v *verifier) global(ctx context.Context, subject string) {
	rule := rules.Rule{
		API: v.t.api, Route: "GET /hello", Subject: subject, Limit: new(int64(1000)), Period: rules.Period(time.Hour), Global: true,
		Description: "sluice verify: removed when it finishes",
	}
	created, err := v.write(ctx, rule)
	if err != nil {
		v.add(globalCheck, fmt.Errorf("POST /rules (global): %w", err), "")
		return
	}
	query := url.Values{"api": {v.t.api}, "route": {rule.Route}}
	var got []int
	var use *admin.GlobalUse
	// As binds: under the demo API's throttle.
	err = poll(ctx, time.Now().Add(v.cmd.Within), 200*time.Millisecond, func() (bool, error) {
		resp, err := v.get(ctx, v.t.demo+"/hello", subject)
		if err != nil {
			return false, err
		}
		got = append(got, resp.StatusCode)
		var lim admin.SubjectLimitsResponse
		if err := v.c.GetJSON(ctx, "/subjects/"+url.PathEscape(subject)+"/limits", query, &lim); err != nil {
			return false, fmt.Errorf("GET /subjects/%s/limits: %w", subject, err)
		}
		use = nil
		if i := slices.IndexFunc(lim.Limits, func(l admin.BucketLimit) bool { return l.Rule == created.ID }); i >= 0 {
			use = lim.Limits[i].Global
		}
		return use != nil && (use.Error == "no ledger" || use.Used != nil && *use.Used > 0), nil
	})
	if err != nil {
		v.add(globalCheck, err, "")
		return
	}
	switch {
	case use != nil && use.Error == "no ledger" && v.t.ledger == "":
		v.skip(globalCheck, "no ledger: global rules are decided as regional ones (a stack outside a family of Regions)")
		return
	case use == nil:
		err = fmt.Errorf("GET /subjects/%s/limits has no global state for rule %s", subject, created.ID)
	case use.Error == "no ledger":
		err = fmt.Errorf("the stack has the ledger %s, but the admin functions run without it (redeploy the stack)", v.t.ledger)
	case use.Error != "":
		err = fmt.Errorf("%s: check the functions' grant on the ledger, the VPC's DynamoDB endpoint and this Region's replica", use.Error)
	case use.Used == nil || *use.Used == 0:
		err = fmt.Errorf("answers %v, and the ledger's count of rule %s stayed 0 for %v: the authorizer decides global rules without the ledger (its failure mode)", got, created.ID, v.cmd.Within)
	}
	used := int64(0)
	if use != nil && use.Used != nil {
		used = *use.Used
	}
	v.add(globalCheck, err, "rule %s: %d taken from the ledger after %d requests", created.ID, used, len(got))
}

// binds sends GET /hello as r's subject until the rule's 429, within the
// bound.
func (v *verifier) binds(ctx context.Context, r rules.Rule, written time.Time) {
	var first, denied *http.Response
	var got []int
	// 5 a second: under the demo API's throttle (10 a second, burst 20),
	// and a version poll (1 s) is several tries.
	err := poll(ctx, written.Add(v.cmd.Within), 200*time.Millisecond, func() (bool, error) {
		resp, err := v.get(ctx, v.t.demo+"/hello", r.Subject)
		if err != nil {
			return false, err
		}
		got = append(got, resp.StatusCode)
		if first == nil && resp.StatusCode == http.StatusOK {
			first = resp
		}
		if resp.StatusCode == http.StatusTooManyRequests && strings.Contains(resp.Header.Get("RateLimit-Policy"), `"`+r.ID+`"`) {
			denied = resp
		}
		return denied != nil, nil
	})
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
		// On AWS a REST 200 carries a field only through its method
		// response's mapping from context.authorizer.<key>, which the
		// demo methods have had since the stack mapped them.
		err = fmt.Errorf("200 without RateLimit or RateLimit-Policy (headers %v): the demo methods do not map them from "+
			"the authorizer context (a stack deployed before they did: redeploy it)", first.Header)
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

// awsConfig is the SDK's default configuration in the stack's Region:
// --region, else the admin API's, else the chain's.
func (v *verifier) awsConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, err
	}
	var apiRegion string
	if u, perr := url.Parse(v.t.admin); perr == nil {
		apiRegion, _ = adminclient.ExecuteAPIRegion(u.Hostname())
	}
	cfg.Region = cmp.Or(v.cmd.Region, apiRegion, cfg.Region)
	return cfg, nil
}

const replicaCheck = "subject key replicated here"

// replica checks, in a family of Regions, that Secrets Manager holds the
// subject hash key in the stack's Region: CloudFormation reports the
// primary secret created even when a replica failed (a secret of that
// name already in the Region, a KMS key it cannot use), and the
// authorizers there then fail at every cold start. The primary's
// ReplicationStatus tells each replica's state; from the first Region's
// stack, every replica's.
func (v *verifier) replica(ctx context.Context) {
	if v.t.stack == "" {
		v.skip(replicaCheck, "sluice local: one Region, one key")
		return
	}
	if v.t.subjectKey == "" || len(v.t.regions) == 0 {
		v.skip(replicaCheck, "no SubjectKeyName and GlobalRegions outputs: a stack outside a family of Regions keeps its key to itself")
		return
	}
	cfg, err := v.awsConfig(ctx)
	if err != nil {
		v.add(replicaCheck, err, "")
		return
	}
	primary, here := v.t.regions[0], cfg.Region
	want := []string{here}
	if here == primary {
		want = v.t.regions[1:]
	} else if !slices.Contains(v.t.regions, here) {
		v.add(replicaCheck, fmt.Errorf("the stack's Region %q is not one of GlobalRegions %s (pass --region)", here, strings.Join(v.t.regions, ",")), "")
		return
	}
	if v.sm == nil {
		cfg.Region = primary
		v.sm = secretsmanager.NewFromConfig(cfg)
	}
	out, err := v.sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &v.t.subjectKey})
	if err != nil {
		v.add(replicaCheck, fmt.Errorf("describe secret %s in %s: %w", v.t.subjectKey, primary, err), "")
		return
	}
	status := map[string]string{}
	var bad []string
	for _, r := range out.ReplicationStatus {
		if r.Region != nil {
			status[*r.Region] = string(r.Status)
			if r.Status != "InSync" && slices.Contains(want, *r.Region) {
				bad = append(bad, fmt.Sprintf("%s %s (%s)", *r.Region, r.Status, aws.ToString(r.StatusMessage)))
			}
		}
	}
	for _, r := range want {
		if _, ok := status[r]; !ok {
			bad = append(bad, r+" not a replica")
		}
	}
	if bad != nil {
		err = fmt.Errorf("secret %s in %s: replica %s: the authorizers there fail at cold start, or hash with another key; "+
			"InProgress settles within minutes, else fix the cause and retry: aws secretsmanager replicate-secret-to-regions "+
			"--region %s --secret-id %s --add-replica-regions Region=<Region> --force-overwrite-replica-secret",
			v.t.subjectKey, primary, strings.Join(bad, ", "), primary, v.t.subjectKey)
	}
	v.add(replicaCheck, err, "secret %s: %s InSync (primary in %s)", v.t.subjectKey, strings.Join(want, ", "), primary)
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
	if v.cw == nil {
		cfg, err := v.awsConfig(ctx)
		if err != nil {
			v.add(check, err, "")
			return
		}
		v.cw = cloudwatch.NewFromConfig(cfg)
	}
	// CloudFormation names an alarm <stack>-<logical id>-<suffix>. The
	// hyphen keeps out SluiceStaging-...; ownAlarm keeps out the alarms of
	// <stack>-<Region>, a family member deployed in the same Region.
	prefix := v.t.stack + "-"
	var n int
	var bad []string
	var err error
	p := cloudwatch.NewDescribeAlarmsPaginator(v.cw, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			v.add(check, fmt.Errorf("describe alarms %s*: %w", prefix, err), "")
			return
		}
		for _, a := range page.MetricAlarms {
			if !ownAlarm(v.t.stack, *a.AlarmName) {
				continue
			}
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

// regionName matches the start of a Region name and the hyphen after it.
var regionName = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+-`)

// ownAlarm reports whether name, listed by the prefix stack-, is an alarm
// of stack and not of stack-<Region> (globalRegions' stack names): the
// stack's logical ids begin with a capital, a Region with a lowercase
// letter.
func ownAlarm(stack, name string) bool {
	rest, ok := strings.CutPrefix(name, stack+"-")
	return ok && !regionName.MatchString(rest)
}

// cleanup removes the rules and their subjects' buckets (the first
// rule's subject also served the check API as <subject>-check), and says
// so.
func (v *verifier) cleanup() {
	ctx, c := context.WithoutCancel(v.e.ctx), v.c
	var err error
	var ids []string
	for i, r := range v.written {
		ids = append(ids, r.ID)
		if derr := c.SendJSON(ctx, http.MethodDelete, "/rules/"+url.PathEscape(r.ID), nil, r.Version, nil); derr != nil {
			err = errors.Join(err, derr)
			continue
		}
		subjects := []string{r.Subject}
		if i == 0 {
			subjects = append(subjects, r.Subject+"-check")
		}
		for _, s := range subjects {
			if _, rerr := c.Do(ctx, http.MethodDelete, "/subjects/"+url.PathEscape(s)+"/buckets", nil, nil, 0); rerr != nil {
				err = errors.Join(err, fmt.Errorf("reset subject %s: %w", s, rerr))
			}
		}
		if gerr := c.GetJSON(ctx, "/rules/"+url.PathEscape(r.ID), nil, &rules.Rule{}); !isNotFound(gerr) {
			err = errors.Join(err, fmt.Errorf("rule %s still there after DELETE: %v", r.ID, gerr))
		}
	}
	v.add("test rules and subjects removed", err, "rules %s deleted, buckets of %s reset", strings.Join(ids, ", "), v.written[0].Subject)
}

func (v *verifier) notRun(checks ...string) {
	for _, c := range checks {
		v.res = append(v.res, verifyResult{Check: c, Detail: "not run: an earlier check failed"})
	}
}

// get sends GET target without admin credentials, as subject (its API
// key; "" for none), and reads the answer.
func (v *verifier) get(ctx context.Context, target, subject string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if subject != "" {
		req.Header.Set("x-api-key", subject)
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
