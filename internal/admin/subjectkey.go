package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/subjectkey"
)

// claimKey makes sure the buckets the Service is about to read, reset or
// charge are named with its own subject hash key: it writes the record as
// the deployment does (subjectkey.Record.Deploy), at each call, so a fix
// is seen at once. A process that hashes subjects under another key (an
// embedded ratelimit.Limiter without the deployment's key, another
// deployment on the same prefix) charges buckets this one would never
// touch, and a reset or a refund would answer 204 or 200 while the
// subject stays denied. A record of another key is a 409 that names the
// fix; Redis failing is the usual 503.
func (s *Service) claimKey(ctx context.Context) error {
	if s.o.SubjectKey == nil {
		return nil
	}
	_, err := s.o.SubjectKey.Deploy(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, subjectkey.ErrMismatch):
		return &httpapi.Error{Status: http.StatusConflict, Err: err, Detail: "The subject hash key recorded for the buckets in Redis is not this deployment's, " +
			"so this call would act on buckets nothing charges. " + err.Error() + "."}
	}
	return fmt.Errorf("check the subject hash key: %w", err)
}

// claimKeyAfterPublish writes the record next to the rules snapshot just
// published, so that a Limiter embedded later with another key refuses to
// start; a record of another key, or Redis failing, is logged with the
// fix: the rules write stands.
func (s *Service) claimKeyAfterPublish(ctx context.Context, route string) {
	if s.o.SubjectKey == nil {
		return
	}
	if _, err := s.o.SubjectKey.Deploy(ctx); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, subjectkey.ErrMismatch) {
			level = slog.LevelError
		}
		s.o.Logger.Log(ctx, level, "subject hash key not confirmed: the admin API refuses to reset, refund or inspect buckets until it is",
			slog.String("route", route), slog.Any("error", err))
	}
}
