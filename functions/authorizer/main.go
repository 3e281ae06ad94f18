// Command authorizer is the Sluice Lambda authorizer: API Gateway REST API
// REQUEST events and HTTP API payload 2.0 events in, policies or simple
// responses out. Wiring only: the decision is internal/authorizer's, the
// events' conversion internal/edge's, the object graph internal/app's.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/decidemain"
)

func main() {
	decidemain.Run("authorizer", func(d *app.Decider) lambda.Handler { return d.Authorizer })
}
