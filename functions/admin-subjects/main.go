// Command admin-subjects is the Lambda function behind the bucket routes
// of the Sluice admin API: a subject's limits, its reset, and usage
// reports. Wiring only: the routes' code is in internal/admin, the object
// graph is built by internal/app. It reads rules on the database's
// read-only role and works on buckets in Redis.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
)

func main() {
	adminmain.Run(admin.FunctionSubjects, app.AdminFull, nil)
}
