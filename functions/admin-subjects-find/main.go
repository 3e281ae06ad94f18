// Command admin-subjects-find is the Lambda function behind
// POST /subjects/find of the Sluice admin API. Wiring only: the route's
// code is in internal/admin, the object graph is built by internal/app.
// It hashes the subject with the subject hash key and looks for it in
// the top denied subjects, which on AWS come from CloudWatch Contributor
// Insights, as for admin-stats: the reader is built here so that no other
// function links the CloudWatch SDK. No Redis, no database.
package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/app/adminmain"
	"github.com/sluicehq/sluice/internal/stats/insights"
)

func main() {
	adminmain.Run("admin-subjects-find", app.Stats, admin.RouteFindSubject, func(ctx context.Context, prefix string) (admin.StatsReader, error) {
		return insights.Load(ctx, prefix)
	})
}
