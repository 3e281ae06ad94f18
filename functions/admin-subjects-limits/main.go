// Command admin-subjects-limits is the Lambda function behind
// GET /subjects/{subject}/limits of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
)

func main() { adminmain.Run("admin-subjects-limits", app.Administer, admin.RouteSubjectLimits, nil) }
