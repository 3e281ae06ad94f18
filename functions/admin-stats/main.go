// Command admin-stats is the Lambda function behind
// GET /stats of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
// It alone reads CloudWatch (Contributor Insights): the reader is built
// here so that no other function links the CloudWatch SDK.
package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
	"github.com/sluicehq/sluice/internal/stats/insights"
)

func main() {
	adminmain.Run("admin-stats", app.Stats, admin.RouteStats, func(ctx context.Context, prefix string) (admin.StatsReader, error) {
		return insights.Load(ctx, prefix)
	})
}
