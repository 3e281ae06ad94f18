// Command admin-read is the Lambda function behind the rule and plan reads
// of the Sluice admin API, and its OpenAPI document. Wiring only: the
// routes' code is in internal/admin, the object graph is built by
// internal/app. It builds the Read part: the database's read-only role, no
// Redis.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
)

func main() {
	adminmain.Run(admin.FunctionRead, app.AdminRead, nil)
}
