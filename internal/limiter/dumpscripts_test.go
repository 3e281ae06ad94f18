package limiter

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDumpScripts writes every script as Redis runs it (bucket.lua and
// stored.lua put in, script.go) into the directory SLUICE_DUMP_SCRIPTS
// names, for measuring variants of one outside Go (scripts/script-cost.sh):
//
//	SLUICE_DUMP_SCRIPTS=/tmp/lua go test -count=1 -run TestDumpScripts ./internal/limiter/
func TestDumpScripts(t *testing.T) {
	dir := os.Getenv("SLUICE_DUMP_SCRIPTS")
	if dir == "" {
		t.Skip("SLUICE_DUMP_SCRIPTS=<directory> writes the scripts there")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"charge.lua":     chargeSrc,
		"charge_one.lua": chargeOneSrc,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
