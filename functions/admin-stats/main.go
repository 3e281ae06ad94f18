// Command admin-stats is the Lambda function behind GET /stats and
// POST /subjects/find of the Sluice admin API. Wiring only: the routes'
// code is in internal/admin, the object graph is built by internal/app.
// It alone reads CloudWatch (Contributor Insights): the reader is built
// here so that no other function links the CloudWatch SDK. No database,
// no Redis; the subject hash key for POST /subjects/find.
package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
	"github.com/sluicehq/sluice/internal/stats/insights"
)

func main() {
	adminmain.Run(admin.FunctionStats, app.AdminStats,
		func(ctx context.Context, prefix string) (admin.StatsReader, error) {
			return insights.Load(ctx, prefix)
		})
}
