// Command admin-subjects-limits is the Lambda function behind
// GET /subjects/{subject}/limits of the Sluice admin API. Wiring only: see
// internal/admin/adminlambda.
package main

import (
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/admin/adminlambda"
)

func main() { adminlambda.Main(admin.RouteSubjectLimits) }
