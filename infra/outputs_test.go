package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/infra/sluice"
)

// TestDatabaseOutputIsReader: the DatabaseSecretArn output, which a
// function of another app reads to share the deployment, is the
// read-only role's login, not the owner's: such a function reads rules.
func TestDatabaseOutputIsReader(t *testing.T) {
	for _, v := range []variant{full, small} {
		_, js := synth(t, v)
		outs, _ := js["Outputs"].(map[string]any)
		o, _ := outs[sluice.OutputDatabaseSecretArn].(map[string]any)
		ids := refs(o["Value"])
		if len(ids) != 1 || !strings.HasPrefix(ids[0], "DbReaderSecret") {
			t.Errorf("%s: output %s = %v, want the read-only role's secret (DbReaderSecret…)", v, sluice.OutputDatabaseSecretArn, fmt.Sprint(o["Value"]))
		}
	}
}
