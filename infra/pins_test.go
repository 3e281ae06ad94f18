package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerlessCachePinned: a serverless cache (the small profile's, and
// serverlessRedis) names its major engine version, as the replication
// group names its version: unset, each new stack gets ElastiCache's
// default of the day.
func TestServerlessCachePinned(t *testing.T) {
	for _, v := range []variant{serverless, small} {
		_, js := synth(t, v)
		for _, c := range resources(js, "AWS::ElastiCache::ServerlessCache") {
			if c.Props["MajorEngineVersion"] != "7" {
				t.Errorf("%s: ServerlessCache MajorEngineVersion = %v, want 7 (valkey 7.2's)", v, c.Props["MajorEngineVersion"])
			}
		}
	}
}

// nagReason is the reason the template gives for suppressing rule on
// the resources of typ, "" when none does.
func nagReason(js map[string]any, typ, rule string) string {
	for id, r := range js["Resources"].(map[string]any) {
		m := r.(map[string]any)
		if m["Type"] != typ {
			continue
		}
		md, _ := m["Metadata"].(map[string]any)
		nag, _ := md["cdk_nag"].(map[string]any)
		for _, s := range list(nag["rules_to_suppress"]) {
			if s, _ := s.(map[string]any); s["id"] == rule {
				return id + ": " + s["reason"].(string)
			}
		}
	}
	return ""
}

// TestNagReasonsHold: a suppression's reason says what the template does.
// The small profile has no RDS Proxy, so its cluster's AwsSolutions-RDS6
// reason must not rest on one.
func TestNagReasonsHold(t *testing.T) {
	for _, c := range []struct {
		v          variant
		proxy      bool
		wantReason string
	}{{full, true, "through the RDS Proxy"}, {small, false, "no RDS Proxy"}} {
		_, js := synth(t, c.v)
		if n := len(resources(js, "AWS::RDS::DBProxy")); (n > 0) != c.proxy {
			t.Fatalf("%s: %d RDS proxies", c.v, n)
		}
		if r := nagReason(js, "AWS::RDS::DBCluster", "AwsSolutions-RDS6"); !strings.Contains(r, c.wantReason) {
			t.Errorf("%s: AwsSolutions-RDS6 suppressed as %q, want a reason saying %q", c.v, r, c.wantReason)
		}
	}
}

// TestLimitsFileCapped: -c limitsFile over 100,000 bytes fails the synth:
// the migration's event carries it twice (new and old properties), and
// Lambda caps the asynchronous event CloudFormation sends at 256 KB.
func TestLimitsFileCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("jsii")
	}
	head, err := os.ReadFile("../examples/limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size int
		ok   bool
	}{{maxLimits, true}, {maxLimits + 1, false}} {
		// A valid file padded with a comment to the size.
		pad := c.size - len(head) - 2
		b := append(append([]byte{}, head...), "\n#"+strings.Repeat("x", pad)...)
		if len(b) != c.size {
			t.Fatalf("padded to %d bytes, want %d", len(b), c.size)
		}
		f := filepath.Join(t.TempDir(), "limits.yaml")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		ctx := map[string]any{"assetRoot": assetRoot, "limitsFile": f, "profile": "small"}
		_, err := run(newApp(ctx))
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "want at most 100000")) {
			t.Errorf("-c limitsFile of %d bytes: %v, want ok=%v (else naming the cap)", c.size, err, c.ok)
		}
	}
}
