// Command admin-usage is the Lambda function behind
// POST /usage of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
)

func main() { adminmain.Run("admin-usage", app.Administer, admin.RouteUsage, nil) }
