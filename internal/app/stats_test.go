package app_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/config"
)

// TestStatsPart: the admin-stats function's graph needs no Redis and no
// database (it runs outside the VPC); without INSIGHTS_RULE_PREFIX it
// answers 503, with it it builds the Contributor Insights reader without
// calling AWS at init.
func TestStatsPart(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "eu-west-1",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
	} {
		t.Setenv(k, v)
	}
	ev := events.APIGatewayProxyRequest{HTTPMethod: "GET", Resource: "/stats", Path: "/stats"}
	for _, tt := range []struct {
		prefix string
		want   int
	}{{"", http.StatusServiceUnavailable}, {"Sluice-sluice", 0}} {
		cfg, err := config.FromEnv(func(k string) string {
			if k == "INSIGHTS_RULE_PREFIX" {
				return tt.prefix
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		a, err := app.New(context.Background(), cfg, app.Options{Parts: app.Stats, Out: io.Discard})
		if err != nil {
			t.Fatalf("New(Stats, prefix %q) = %v, want no error without Redis or a database", tt.prefix, err)
		}
		if a.Redis != nil || a.Store != nil {
			t.Errorf("New(Stats) built Redis %v, store %v; want neither", a.Redis, a.Store)
		}
		if tt.want != 0 {
			resp, _ := a.AdminHandler(admin.RouteStats)(context.Background(), ev)
			if resp.StatusCode != tt.want {
				t.Errorf("GET /stats without a prefix = %d %s, want %d", resp.StatusCode, resp.Body, tt.want)
			}
		}
		a.Close()
	}
}
