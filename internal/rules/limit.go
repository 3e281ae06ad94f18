package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ParseLimit parses a limit such as "100/1m" or "100/1m,burst=200": tokens
// per period (a Period such as 30s, 1m, 1h, 1d), and optionally the
// bucket capacity (default: the limit). "0/1m" blocks. The refill horizon,
// burst × period ÷ limit, must be at most MaxHorizon (10y), as for
// every rule. It returns an Effective with Limit, Period and Burst set.
func ParseLimit(s string) (*Effective, error) {
	head, opts, _ := strings.Cut(s, ",")
	limStr, perStr, ok := strings.Cut(strings.TrimSpace(head), "/")
	if !ok {
		return nil, fmt.Errorf("%q is not <limit>/<period>[,burst=<n>], such as 100/1m", s)
	}
	var errs []error
	limit, err := strconv.ParseInt(strings.TrimSpace(limStr), 10, 64)
	if err != nil || limit < 0 || limit > MaxLimit {
		errs = append(errs, fmt.Errorf("limit %q must be an integer from 0 to %d", limStr, MaxLimit))
	}
	period, err := ParsePeriod(strings.TrimSpace(perStr))
	if err != nil {
		errs = append(errs, fmt.Errorf("period %q %w", perStr, err))
	}
	burst := limit
	if opts != "" {
		key, val, _ := strings.Cut(strings.TrimSpace(opts), "=")
		b, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		switch {
		case strings.TrimSpace(key) != "burst":
			errs = append(errs, fmt.Errorf("%q is not burst=<n>", opts))
		case err != nil || b < 0 || b > MaxBurst:
			errs = append(errs, fmt.Errorf("burst %q must be an integer from 1 to %d", val, MaxBurst))
		case limit > 0 && b < limit:
			errs = append(errs, fmt.Errorf("burst %d must be at least the limit %d", b, limit))
		case limit == 0 && b != 0:
			errs = append(errs, errors.New("burst must be 0 when the limit is 0: the default blocks"))
		default:
			burst = b
		}
	}
	if len(errs) == 0 && !WithinHorizon(burst, limit, period.Duration()) {
		// The bound every rule and plan obeys (MaxHorizon): beyond it
		// the limiter refuses the bucket.
		errs = append(errs, fmt.Errorf("burst %d at %d per %s takes longer than %s to refill (burst × period ÷ limit)",
			burst, limit, period, Period(MaxHorizon)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Effective{Limit: limit, Period: period.Duration(), Burst: burst}, nil
}
