package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/infra/sluice"
)

// TestAssetsRefused: a synth whose Lambda binaries are missing, or (small
// profile, Aurora without a proxy) were built without the RDS CA bundle,
// stops with what to run instead of a jsii stack trace or a rollback at the
// migration. Amazon RDS instance certificates are issued by the RDS CAs
// (rds-ca-rsa2048-g1 by default), which are not in public trust stores;
// RDS Proxy's come from AWS Certificate Manager, under Amazon Trust
// Services roots ("Using TLS/SSL with RDS Proxy" and "Using SSL/TLS to
// encrypt a connection to a DB cluster", Amazon Aurora User Guide).
func TestAssetsRefused(t *testing.T) {
	withoutCA := t.TempDir()
	for _, name := range sluice.Functions {
		if err := os.MkdirAll(filepath.Join(withoutCA, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(withoutCA, name, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice/db"
	for _, tt := range []struct {
		name string
		p    StackProps
		want string // "" : synthesizes
	}{
		{"no binaries", StackProps{AssetRoot: t.TempDir()}, "run `make build-arm64`"},
		{"small without the bundle", StackProps{AssetRoot: withoutCA, Profile: "small"}, "run `make rds-ca build-arm64`"},
		{"small with the bundle", StackProps{AssetRoot: assetRoot, Profile: "small"}, ""},
		// Behind the proxy, and a database brought along, need no bundle.
		{"production without the bundle", StackProps{AssetRoot: withoutCA}, ""},
		{"small, own database", StackProps{AssetRoot: withoutCA, Profile: "small", VpcID: byoVpcID, DatabaseSecretArn: secret}, ""},
	} {
		err := checkAssets(tt.p.withProfile(), tt.p.small() && !tt.p.byoDatabase())
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: checkAssets = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: checkAssets = %v, want %q in it", tt.name, err, tt.want)
		}
	}
	// NewStack stops there too.
	if _, err := NewStack(newApp(nil), "Small", &StackProps{AssetRoot: withoutCA, Profile: "small"}); err == nil || !strings.Contains(err.Error(), "make rds-ca") {
		t.Errorf("NewStack(small, no bundle) = %v, want the rds-ca advice", err)
	}
}
