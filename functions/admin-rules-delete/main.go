// Command admin-rules-delete is the Lambda function behind
// DELETE /rules/{id} of the Sluice admin API. Wiring only: see
// internal/admin/adminlambda.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/admin/adminlambda"
)

func main() { adminlambda.Main(admin.RouteDeleteRule) }
