package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/limiter"
)

// claimKey makes sure the buckets the Service is about to read, reset or
// charge are named with its own subject hash key
// (limiter.ClaimSubjectKey): a process that hashes subjects under another
// key (an embedded ratelimit.Limiter without the deployment's key, another
// deployment on the same prefix) charges buckets this one would never
// touch, and a reset or a refund would answer 204 or 200 while the subject
// stays denied. A mismatch is a 409 that says so; Redis failing is the
// usual 503.
func (s *Service) claimKey(ctx context.Context) error {
	err := s.buckets.ClaimSubjectKey(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, limiter.ErrSubjectKeyMismatch):
		return &httpapi.Error{Status: http.StatusConflict, Err: err, Detail: "The subject hash key recorded for the buckets in Redis is not this deployment's: " +
			"another process (an embedded ratelimit.Limiter, or another deployment on the same REDIS_PREFIX) names them with another key, " +
			"so this call would act on buckets nothing charges. Give every process the deployment's key (SUBJECT_HMAC_KEY_SECRET_ARN); " +
			"after a deliberate key change, delete the record. " + err.Error() + "."}
	}
	return fmt.Errorf("check the subject hash key: %w", err)
}

// claimKeyAfterPublish records the Service's subject hash key next to the
// rules snapshot it has just published, so that a Limiter embedded later
// with another key refuses to start; a mismatch, or Redis failing, is
// logged: the rules write stands.
func (s *Service) claimKeyAfterPublish(ctx context.Context, route string) {
	if s.buckets == nil {
		return
	}
	if err := s.buckets.ClaimSubjectKey(ctx); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, limiter.ErrSubjectKeyMismatch) {
			level = slog.LevelError
		}
		s.log.Log(ctx, level, "subject hash key not confirmed: the admin API refuses to reset, refund or inspect buckets until it is",
			slog.String("route", route), slog.Any("error", err))
	}
}
