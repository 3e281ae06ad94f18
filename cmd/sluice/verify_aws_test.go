package main

import (
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/sluicehq/sluice/internal/headers"
)

// awsGateway answers as a deployed stack's two REST APIs do, in front of
// a `sluice local` Region (base, token) that decides: the admin API
// (AWS_IAM) refuses an unsigned request with API Gateway's 403 and takes
// one SigV4-signed for its region; the demo API's 200 comes from its
// MOCK integration and carries API Gateway's own headers and only the
// fields its method response maps (mapped), where sluice local adds every
// rate-limit field;
// a 429 or 401 is the gateway response, which sluice local renders as
// API Gateway does (internal/denial).
type awsGateway struct {
	admin, demo *httptest.Server
}

func newAWSGateway(t *testing.T, base, token string, mapped []string, region string) *awsGateway {
	t.Helper()
	forward := func(w http.ResponseWriter, r *http.Request, target string, edit func(*http.Request)) *http.Response {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target, r.Body)
		if err != nil {
			t.Error(err)
			return nil
		}
		req.Header = r.Header.Clone()
		edit(req)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return nil
		}
		return resp
	}
	copyResp := func(w http.ResponseWriter, resp *http.Response, keep func(string) bool) {
		defer resp.Body.Close()
		for k, v := range resp.Header {
			if keep(k) {
				w.Header()[k] = v
			}
		}
		w.Header().Set("x-amzn-RequestId", "c0ffee00-0000-4000-8000-000000000000")
		w.Header().Set("x-amz-apigw-id", "Ab1Cd2Ef3Gh4=")
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body) //nolint:errcheck // the client has gone
	}
	all := func(string) bool { return true }
	g := &awsGateway{}
	g.admin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := strings.CutPrefix(r.URL.Path, "/prod")
		auth := r.Header.Get("Authorization")
		if !ok || !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=") || !strings.Contains(auth, "/"+region+"/execute-api/aws4_request") {
			w.Header().Set("x-amzn-ErrorType", "MissingAuthenticationTokenException")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"message":"Missing Authentication Token"}`) //nolint:errcheck // the client has gone
			return
		}
		target := base + "/admin" + path
		if r.URL.RawQuery != "" {
			target += "?" + r.URL.RawQuery
		}
		if resp := forward(w, r, target, func(req *http.Request) { req.Header.Set("Authorization", "Bearer "+token) }); resp != nil {
			copyResp(w, resp, all)
		}
	}))
	t.Cleanup(g.admin.Close)
	g.demo = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, _ := strings.CutPrefix(r.URL.Path, "/prod")
		resp := forward(w, r, base+path, func(*http.Request) {})
		if resp == nil {
			return
		}
		keep := all
		if resp.StatusCode == http.StatusOK {
			keep = func(k string) bool { return k == "Content-Type" || containsFold(mapped, k) }
		}
		copyResp(w, resp, keep)
	}))
	t.Cleanup(g.demo.Close)
	return g
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// fakeAlarms is CloudWatch's DescribeAlarms over a Region's alarms: those
// whose name starts with AlarmNamePrefix, two a page.
type fakeAlarms []cwtypes.MetricAlarm

func (f fakeAlarms) DescribeAlarms(_ context.Context, in *cloudwatch.DescribeAlarmsInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.DescribeAlarmsOutput, error) {
	var match []cwtypes.MetricAlarm
	for _, a := range f {
		if in.AlarmNamePrefix == nil || strings.HasPrefix(*a.AlarmName, *in.AlarmNamePrefix) {
			match = append(match, a)
		}
	}
	start := 0
	if in.NextToken != nil {
		start = len(*in.NextToken)
	}
	out := &cloudwatch.DescribeAlarmsOutput{MetricAlarms: match[start:min(start+2, len(match))]}
	if start+2 < len(match) {
		out.NextToken = aws.String(strings.Repeat(".", start+2))
	}
	return out, nil
}

// fakeSecrets is Secrets Manager's DescribeSecret in the primary Region
// over secrets by name, as it answers for a primary secret: its
// ReplicationStatus, one entry per replica Region.
type fakeSecrets map[string][]smtypes.ReplicationStatusType

func (f fakeSecrets) DescribeSecret(_ context.Context, in *secretsmanager.DescribeSecretInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.DescribeSecretOutput, error) {
	rs, ok := f[aws.ToString(in.SecretId)]
	if !ok {
		return nil, &smtypes.ResourceNotFoundException{Message: aws.String("Secrets Manager can't find the specified secret.")}
	}
	return &secretsmanager.DescribeSecretOutput{Name: in.SecretId, ReplicationStatus: rs}, nil
}

// replicas is a ReplicationStatus: region=status pairs, and a failed
// one's message as Secrets Manager words it.
func replicas(pairs ...string) []smtypes.ReplicationStatusType {
	var out []smtypes.ReplicationStatusType
	for _, p := range pairs {
		r, st, _ := strings.Cut(p, "=")
		e := smtypes.ReplicationStatusType{Region: aws.String(r), Status: smtypes.StatusType(st), KmsKeyId: aws.String("alias/aws/secretsmanager")}
		if st == "Failed" {
			e.StatusMessage = aws.String("Replication failed: Secret with the same name already exists in this region.")
		}
		out = append(out, e)
	}
	return out
}

func alarm(name, topic string) cwtypes.MetricAlarm {
	return cwtypes.MetricAlarm{AlarmName: aws.String(name), AlarmActions: []string{topic}}
}

// TestVerifyAWS runs verify's AWS half against what a deployed stack
// answers (awsGateway, and the Region's alarms through DescribeAlarms):
// a healthy regional stack and a healthy Region of a family pass every
// check, neighbours' alarms (SluiceStaging-..., Sluice-us-east-1-...)
// left out; a stack deployed before the demo methods mapped the fields, a
// family whose functions decide without the ledger, a Region whose
// replica of the subject key failed (or, seen from the first Region, any
// Region's), and an alarm that notifies nobody each fail the one check
// that names them.
func TestVerifyAWS(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDVERIFYTEST", "AWS_SECRET_ACCESS_KEY": "verify-test-secret", "AWS_REGION": "eu-west-1",
		"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_PROFILE": "", "AWS_SESSION_TOKEN": "",
	} {
		t.Setenv(k, v)
	}
	const topic = "arn:aws:sns:eu-west-1:123456789012:Sluice-AlarmTopic"
	var mapped []string // what the demo methods map today (infra's TestDemoHeaders)
	for _, f := range headers.Default.Fields() {
		mapped = append(mapped, f.Name)
	}
	regional := startLocal(t, nil)
	token := "test-" + strings.Repeat("r", 8)
	family := startRegions(t, 2, token)
	neighbours := fakeAlarms{
		alarm("SluiceStaging-AuthorizerErrorsAlarm1A2B-X1", "arn:aws:sns:eu-west-1:123456789012:Staging"),
		alarm("Sluice-us-east-1-AuthorizerErrorsAlarm3C4D-X2", "arn:aws:sns:eu-west-1:123456789012:Other"),
	}
	own := func(stack string) fakeAlarms {
		return fakeAlarms{
			alarm(stack+"-AuthorizerStartFailuresAlarm5E6F-Y1", topic),
			alarm(stack+"-FailOpenAlarm7A8B-Y2", topic),
			alarm(stack+"-RedisCpuAlarm9C0D-Y3", topic),
		}
	}
	const key = "Sluice-subject-key"
	inSync := fakeSecrets{key: replicas("eu-west-1=InSync", "eu-west-2=InSync")}
	failed := fakeSecrets{key: replicas("eu-west-1=InSync", "eu-west-2=Failed")}
	concat := func(fs ...fakeAlarms) fakeAlarms {
		var out fakeAlarms
		for _, f := range fs {
			out = append(out, f...)
		}
		return out
	}

	for _, tt := range []struct {
		name      string
		base, tok string
		mapped    []string
		stack     string
		ledger    string
		region    string   // the stack's; default eu-west-1
		regions   []string // GlobalRegions; the first holds the primary key
		secrets   fakeSecrets
		alarms    fakeAlarms
		fail      string // the one check that fails; "" for none
		detail    string
		skipped   []string // checks skipped
	}{
		{name: "healthy regional stack", base: regional.base, tok: regional.token, mapped: mapped, stack: "Sluice",
			alarms: concat(neighbours, own("Sluice"), own("Sluice-eu-west-1")), skipped: []string{globalCheck, replicaCheck}},
		{name: "healthy Region of a family", base: family[0], tok: token, mapped: mapped, stack: "Sluice-eu-west-1", ledger: "Sluice-ledger",
			regions: []string{"eu-west-3", "eu-west-1", "eu-west-2"}, secrets: inSync, alarms: concat(neighbours, own("Sluice-eu-west-1"))},
		{name: "healthy first Region of a family", base: family[0], tok: token, mapped: mapped, stack: "Sluice-eu-west-3", ledger: "Sluice-ledger",
			region: "eu-west-3", regions: []string{"eu-west-3", "eu-west-1", "eu-west-2"}, secrets: inSync, alarms: own("Sluice-eu-west-3")},
		{name: "this Region's replica failed", base: family[0], tok: token, mapped: mapped, stack: "Sluice-eu-west-2", ledger: "Sluice-ledger",
			region: "eu-west-2", regions: []string{"eu-west-3", "eu-west-1", "eu-west-2"}, secrets: failed, alarms: own("Sluice-eu-west-2"),
			fail: replicaCheck, detail: "eu-west-2 Failed (Replication failed: Secret with the same name already exists"},
		{name: "another Region's replica failed, seen from the first", base: family[0], tok: token, mapped: mapped, stack: "Sluice-eu-west-3",
			ledger: "Sluice-ledger", region: "eu-west-3", regions: []string{"eu-west-3", "eu-west-1", "eu-west-2"}, secrets: failed,
			alarms: own("Sluice-eu-west-3"), fail: replicaCheck, detail: "--region eu-west-3 --secret-id Sluice-subject-key"},
		{name: "a Region that is no replica", base: family[0], tok: token, mapped: mapped, stack: "Sluice-eu-west-1", ledger: "Sluice-ledger",
			regions: []string{"eu-west-3", "eu-west-1", "eu-west-2"}, secrets: fakeSecrets{key: replicas("eu-west-2=InSync")},
			alarms: own("Sluice-eu-west-1"), fail: replicaCheck, detail: "eu-west-1 not a replica"},
		{name: "demo methods map no field", base: regional.base, tok: regional.token, stack: "Sluice", alarms: own("Sluice"),
			fail: "200 with RateLimit, RateLimit-Policy", detail: "redeploy", skipped: []string{globalCheck, replicaCheck}},
		{name: "family functions without the ledger", base: regional.base, tok: regional.token, mapped: mapped, stack: "Sluice-eu-west-1",
			ledger: "Sluice-ledger", regions: []string{"eu-west-3", "eu-west-1", "eu-west-2"}, secrets: inSync, alarms: own("Sluice-eu-west-1"),
			fail: globalCheck, detail: "run without it"},
		{name: "an alarm notifies no topic", base: regional.base, tok: regional.token, mapped: mapped, stack: "Sluice",
			alarms: append(own("Sluice"), alarm("Sluice-LedgerAlarm1F2E-Y4", "")), fail: "alarms notify the topic",
			detail: "Sluice-LedgerAlarm1F2E-Y4", skipped: []string{globalCheck, replicaCheck}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := &verifyCmd{Region: cmp.Or(tt.region, "eu-west-1"), Within: 3 * time.Second, Timeout: 10 * time.Second}
			g := newAWSGateway(t, tt.base, tt.tok, tt.mapped, cmd.Region)
			v := &verifier{
				e: &env{ctx: context.Background(), stdout: io.Discard, stderr: io.Discard}, cmd: cmd,
				t: verifyTarget{
					demo: g.demo.URL + "/prod", admin: g.admin.URL + "/prod", api: "demo",
					stack: tt.stack, topic: topic, ledger: tt.ledger, regions: tt.regions,
				},
				http: &http.Client{Timeout: cmd.Timeout}, cw: tt.alarms,
			}
			if tt.regions != nil {
				v.t.subjectKey, v.sm = key, tt.secrets
			}
			res := v.run()
			b, _ := json.MarshalIndent(res, "", "  ")
			if len(res) != 11 {
				t.Errorf("%d checks, want 11:\n%s", len(res), b)
			}
			for _, r := range res {
				switch {
				case r.Check == tt.fail:
					if r.OK || r.Skip || !strings.Contains(r.Detail, tt.detail) {
						t.Errorf("check %q = %+v, want failed naming %q", r.Check, r, tt.detail)
					}
				case slices.Contains(tt.skipped, r.Check):
					if !r.Skip {
						t.Errorf("check %q = %+v, want skipped", r.Check, r)
					}
				case !r.OK:
					t.Errorf("check %q = %+v, want ok\nall:\n%s", r.Check, r, b)
				}
				if r.Check == "alarms notify the topic" && tt.fail == "" && !strings.HasPrefix(r.Detail, "3 alarms") {
					t.Errorf("alarms check = %q, want the stack's own 3 alarms alone", r.Detail)
				}
			}
		})
	}
}
