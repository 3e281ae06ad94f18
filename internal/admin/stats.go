package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/stats"
)

// StatsReader reports what was limited over a window, for GET /stats:
// *stats.Stats (the decisions of this process, sluice local) or the
// Contributor Insights reader of the deployed stack
// (internal/stats/insights).
type StatsReader interface {
	// MaxWindow is the longest window it answers.
	MaxWindow() time.Duration
	// TopContributors returns the top n rules and subjects over the last
	// window (a whole number of minutes, from 1m to MaxWindow).
	TopContributors(ctx context.Context, window time.Duration, n int) (stats.Report, error)
}

// StatsResponse is the body of GET /stats: the report, and the longest
// window this source answers, so that a client offers only those.
type StatsResponse struct {
	stats.Report
	// MaxWindow is the longest window, such as "15m" (sluice local) or
	// "24h" (Contributor Insights).
	MaxWindow string `json:"max_window"`
}

// Query defaults and bounds of GET /stats.
const (
	DefaultStatsWindow = 5 * time.Minute
	DefaultStatsTop    = 10
	MaxStatsTop        = 100
)

// stats answers GET /stats?window=5m&top=10: the top limiting rules and
// the top denied subjects over the window.
func (s *Service) stats(ctx context.Context, c *call) (reply, error) {
	top := 0 // the default
	if v := c.Query.Get("top"); v != "" {
		top = -1 // out of range: statsParams says what is allowed
		if n, err := strconv.Atoi(v); err == nil && n != 0 {
			top = n
		}
	}
	window, top, fields := s.statsParams(c.Query.Get("window"), top)
	for k := range c.Query {
		if k != "window" && k != "top" {
			fields = append(fields, httpapi.FieldError(httpapi.Truncate(k), "is not a parameter of this route (window, top)"))
		}
	}
	if len(fields) > 0 {
		return reply{}, httpapi.BadRequest(fields...)
	}
	rep, err := s.topContributors(ctx, window, top)
	if err != nil {
		return reply{}, err
	}
	return reply{status: http.StatusOK, body: StatsResponse{Report: rep, MaxWindow: shortDuration(s.maxWindow())}}, nil
}

// maxWindow is the longest window GET /stats answers.
func (s *Service) maxWindow() time.Duration {
	if s.o.Stats != nil {
		return s.o.Stats.MaxWindow()
	}
	return 15 * time.Minute
}

// statsParams checks a window ("" is DefaultStatsWindow) and a top (0 is
// DefaultStatsTop), as GET /stats and POST /subjects/find take them.
func (s *Service) statsParams(w string, top int) (time.Duration, int, []rules.FieldError) {
	var fields []rules.FieldError
	window, maxWindow := DefaultStatsWindow, s.maxWindow()
	if w != "" {
		d, err := time.ParseDuration(w)
		switch {
		case err != nil:
			fields = append(fields, httpapi.FieldError("window", fmt.Sprintf("%q is not a duration such as 5m", httpapi.Truncate(w))))
		case d < time.Minute || d > maxWindow || d%time.Minute != 0:
			fields = append(fields, httpapi.FieldError("window", fmt.Sprintf("must be a whole number of minutes from 1m to %s", shortDuration(maxWindow))))
		default:
			window = d
		}
	}
	switch {
	case top == 0:
		top = DefaultStatsTop
	case top < 1 || top > MaxStatsTop:
		fields = append(fields, httpapi.FieldError("top", fmt.Sprintf("must be a whole number from 1 to %d", MaxStatsTop)))
	}
	return window, top, fields
}

// topContributors reads the report of the window from the stats source.
func (s *Service) topContributors(ctx context.Context, window time.Duration, top int) (stats.Report, error) {
	if s.o.Stats == nil {
		return stats.Report{}, &httpapi.Error{Status: http.StatusServiceUnavailable,
			Detail: "Decision statistics are not configured here: sluice local keeps them in process; a deployed stack reads Contributor Insights (INSIGHTS_RULE_PREFIX)."}
	}
	rep, err := s.o.Stats.TopContributors(ctx, window, top)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return stats.Report{}, &httpapi.Error{Status: http.StatusServiceUnavailable, Detail: "The statistics source did not answer in time; try again.",
				Header: http.Header{"Retry-After": {"1"}}, Err: err}
		}
		return stats.Report{}, fmt.Errorf("read decision statistics: %w", err)
	}
	return rep, nil
}

// shortDuration prints 15m0s as 15m and 24h0m0s as 24h.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
