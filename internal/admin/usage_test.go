package admin_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/store/memory"
)

// usageService is an admin Service over a memory store and the test Redis,
// with a rate rule and a quota rule on api a1 (the quota with a floor).
func usageService(t *testing.T) *admin.Service {
	t.Helper()
	svc := admin.New(memory.New(), nil, testLimiter(t, "admin-usage"), admin.Options{})
	for _, body := range []string{
		`{"api":"a1","route":"*","subject":"*","limit":10,"period":"10s"}`,
		`{"api":"a1","route":"POST /chat","subject":"*","kind":"quota","limit":1000,"period":"1mo","min_remaining":100}`,
	} {
		if r := post(svc, admin.RouteCreateRule, body); r.Status != http.StatusCreated {
			t.Fatalf("create rule %s = %d %s", body, r.Status, r.Body)
		}
	}
	return svc
}

func post(svc *admin.Service, route, body string, header ...string) response {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	_, path, _ := strings.Cut(route, " ")
	return serve(svc, "POST", path, h, body)
}

// TestUsage: POST /usage charges the subject's rate and quota buckets of
// the route, into debt; a retry with the same Idempotency-Key counts once;
// a refund gives back; the limits view shows the quota's used.
func TestUsage(t *testing.T) {
	t.Parallel()
	svc := usageService(t)
	const body = `{"api":"a1","route":"post /chat/","subject":"user:42","cost":14}`
	var got admin.UsageResponse
	r := post(svc, admin.RouteUsage, body, "Idempotency-Key", "resp-1")
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("POST /usage = %d %s", r.Status, r.Body)
	}
	if got.Route != "POST /chat" || got.Duplicate || len(got.Buckets) != 2 ||
		got.Buckets[0].Remaining != -4 || got.Buckets[0].Kind != "rate" ||
		got.Buckets[1].Remaining != 986 || got.Buckets[1].Kind != "quota" {
		t.Errorf("POST /usage = %s, want rate -4 (debt), quota 986", r.Body)
	}
	// The retry counts once.
	r = post(svc, admin.RouteUsage, body, "Idempotency-Key", "resp-1")
	if json.Unmarshal(r.Body, &got) != nil || !got.Duplicate || got.Buckets[1].Remaining != 986 {
		t.Errorf("retried POST /usage = %d %s, want a duplicate charging nothing", r.Status, r.Body)
	}
	// The limits view shows the quota's use (the debt's denial and its
	// wait are TestChargeDebtAndRefund's, in internal/limiter).
	var lr admin.SubjectLimitsResponse
	r = serve(svc, "GET", "/subjects/user:42/limits?api=a1&route=POST+%2Fchat", nil, "")
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &lr) != nil || len(lr.Limits) != 2 {
		t.Fatalf("GET limits = %d %s", r.Status, r.Body)
	}
	q := lr.Limits[1]
	if q.Kind != "quota" || q.Used == nil || *q.Used != 14 || q.ResetsAt == nil || q.MinRemaining != 100 {
		t.Errorf("quota in the limits view = %+v, want used 14, resets_at, min_remaining 100", q)
	}
	// The calendar month's end, to the second (the machine's clock, which
	// is Redis's here: both are this host's).
	now := time.Now().UTC()
	if end := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC); q.ResetsAt != nil && !q.ResetsAt.Equal(end) {
		t.Errorf("resets_at = %v, want the month's end %v", q.ResetsAt, end)
	}
	// A refund, without a key: both back, never above full.
	r = post(svc, admin.RouteUsage, `{"api":"a1","route":"POST /chat","subject":"user:42","cost":-14}`)
	if json.Unmarshal(r.Body, &got) != nil || got.Duplicate || got.Buckets[1].Remaining != 1000 || got.Buckets[0].Remaining < 9 {
		t.Errorf("refund = %d %s, want the quota full again and the rate bucket back", r.Status, r.Body)
	}
}

// TestUsageValidation: every bad field of a usage report, the
// Idempotency-Key header included, is a 400 naming it.
func TestUsageValidation(t *testing.T) {
	t.Parallel()
	svc := usageService(t)
	for _, tt := range []struct {
		name, body, key, field string
	}{
		{"no cost", `{"api":"a1","route":"POST /chat","subject":"u"}`, "", "cost"},
		{"zero cost", `{"api":"a1","route":"POST /chat","subject":"u","cost":0}`, "", "cost"},
		{"huge cost", `{"api":"a1","route":"POST /chat","subject":"u","cost":1000000001}`, "", "cost"},
		{"fractional cost", `{"api":"a1","route":"POST /chat","subject":"u","cost":1.5}`, "", "cost"},
		{"wildcard api", `{"api":"*","route":"POST /chat","subject":"u","cost":1}`, "", "api"},
		{"bad route", `{"api":"a1","route":"chat","subject":"u","cost":1}`, "", "route"},
		{"empty subject", `{"api":"a1","route":"POST /chat","subject":"","cost":1}`, "", "subject"},
		{"control in subject", `{"api":"a1","route":"POST /chat","subject":"a\u0000b","cost":1}`, "", "subject"},
		{"unknown field", `{"api":"a1","route":"POST /chat","subject":"u","cost":1,"plan":"x"}`, "", "plan"},
		{"key with a space", `{"api":"a1","route":"POST /chat","subject":"u","cost":1}`, "a b", "Idempotency-Key"},
		{"key too long", `{"api":"a1","route":"POST /chat","subject":"u","cost":1}`, strings.Repeat("k", 256), "Idempotency-Key"},
		{"empty key", `{"api":"a1","route":"POST /chat","subject":"u","cost":1}`, "\x00empty", "Idempotency-Key"},
		{"bad dimension", `{"api":"a1","route":"POST /chat","subject":"u","cost":1,"dimension":"Tenant!"}`, "", "dimension"},
		{"long subject", `{"api":"a1","route":"POST /chat","subject":"` + strings.Repeat("s", 257) + `","cost":1}`, "", "subject"},
	} {
		var hdr []string
		switch tt.key {
		case "":
		case "\x00empty":
			hdr = []string{"Idempotency-Key", ""}
		default:
			hdr = []string{"Idempotency-Key", tt.key}
		}
		r := post(svc, admin.RouteUsage, tt.body, hdr...)
		if r.Status != http.StatusBadRequest || !strings.Contains(string(r.Body), `"field":"`+tt.field+`"`) {
			t.Errorf("%s: POST /usage = %d %s, want 400 naming %s", tt.name, r.Status, r.Body, tt.field)
		}
	}
}

// TestUsageDimension: a report naming a dimension charges that dimension's
// rules (a tenant's shared quota, by the tenant's id), not the default
// dimension's, and the same id in the default dimension is untouched.
func TestUsageDimension(t *testing.T) {
	t.Parallel()
	svc := usageService(t)
	body := `{"api":"a1","route":"*","subject":"*","kind":"quota","limit":5000,"period":"1d","dimension":"tenant"}`
	if r := post(svc, admin.RouteCreateRule, body); r.Status != http.StatusCreated {
		t.Fatalf("create tenant quota = %d %s", r.Status, r.Body)
	}
	var got admin.UsageResponse
	r := post(svc, admin.RouteUsage, `{"api":"a1","route":"POST /chat","subject":"acme","cost":700,"dimension":"tenant"}`)
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &got) != nil {
		t.Fatalf("POST /usage (tenant) = %d %s", r.Status, r.Body)
	}
	if len(got.Buckets) != 1 || got.Buckets[0].Kind != "quota" || got.Buckets[0].Limit != 5000 || got.Buckets[0].Remaining != 4300 {
		t.Errorf("POST /usage (tenant) = %s, want only the tenant quota, 4300 left", r.Body)
	}
	// "acme" in the default dimension: its own buckets, full.
	r = post(svc, admin.RouteUsage, `{"api":"a1","route":"POST /chat","subject":"acme","cost":1}`)
	if json.Unmarshal(r.Body, &got) != nil || len(got.Buckets) != 2 || got.Buckets[1].Remaining != 999 {
		t.Errorf("POST /usage (default) = %d %s, want the default rate and quota buckets, quota 999", r.Status, r.Body)
	}
}
