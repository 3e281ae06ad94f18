// Command check is the Lambda behind POST /check: a decision for callers
// not behind API Gateway, over a REST proxy or Function URL event. Wiring
// only: it shares the authorizer's (internal/app/decidemain).
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/decidemain"
)

func main() {
	decidemain.Run("check", func(d *app.Decider) lambda.Handler { return d.Check })
}
