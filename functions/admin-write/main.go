// Command admin-write is the Lambda function behind the rule and plan
// writes of the Sluice admin API. Wiring only: the routes' code is in
// internal/admin, the object graph is built by internal/app. It alone of
// the admin functions holds the database's owner login; Redis to publish
// the rules snapshot after each write.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
)

func main() {
	adminmain.Run(admin.FunctionWrite, app.AdminFull, nil)
}
