package main

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/config"
)

// pemHeader opens each certificate of the RDS CA bundle, which a binary
// built with it embeds byte for byte (go:embed, config.RDSCABundle).
var pemHeader = []byte("-----BEGIN CERTIFICATE-----")

// rdsCABundleCerts is the fewest certificates of any published bundle
// version config accepts.
var rdsCABundleCerts = slices.Min(slices.Collect(maps.Values(config.RDSCABundleDigests)))

// checkAssets says what is missing from the prebuilt Lambda binaries the
// stack would upload: a `bootstrap` for each function (else CDK's asset
// staging fails with a jsii stack trace), and, when the functions connect
// to an Aurora instance directly (the small profile creates no RDS Proxy),
// the RDS CA bundle in each binary that connects to it. The instance's
// certificate chains to an RDS root that no system trust store holds, so
// without the bundle every connection fails verification and the deploy
// rolls back at the migration; the proxy's chains to Amazon Trust Services,
// which the system roots hold.
func checkAssets(p *StackProps, direct bool) error {
	var missing, noCA []string
	for _, name := range sluice.Functions {
		path := filepath.Join(sluice.AssetDir(p.AssetRoot, name), "bootstrap")
		b, err := os.ReadFile(path)
		if err != nil {
			missing = append(missing, path)
			continue
		}
		if direct && bytes.Count(b, pemHeader) < rdsCABundleCerts {
			noCA = append(noCA, path)
		}
	}
	var errs []error
	if missing != nil {
		errs = append(errs, fmt.Errorf("no Lambda binary at %v: run `make build-arm64` (or set AssetRoot, -c assetRoot=<dir>) and synth again", missing))
	}
	if noCA != nil {
		errs = append(errs, fmt.Errorf("the small profile connects to Aurora directly, whose certificate only the RDS CA bundle verifies, "+
			"and %v were built without it: run `make rds-ca build-arm64` (or `make deploy`, which runs both) and synth again; "+
			"the deploy would otherwise roll back at the migration", noCA))
	}
	return errors.Join(errs...)
}
