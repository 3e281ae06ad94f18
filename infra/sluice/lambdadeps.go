//go:build sluice_lambda_deps

package sluice

// These imports are never compiled (no build names the tag): `go mod tidy`
// reads files under every build tag, so in a CDK app that imports this
// package they put the checksums of every module the Lambdas import into
// the app's go.sum. [Build] then compiles functions/* with no
// "missing go.sum entry" error, no network and no -mod=mod.
import (
	_ "github.com/aws/aws-lambda-go/lambda"

	_ "github.com/sluicehq/sluice/internal/app"
	_ "github.com/sluicehq/sluice/internal/config"
)
