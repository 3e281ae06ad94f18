package app

import (
	authapigw "github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/internal/config"
)

// RateLimit builds package ratelimit's Limiter over a, an App built with
// the Decide part from cfg: its middleware and Lambda integration wrappers
// then decide with a's own rules cache, limiter, metrics and (with
// o.Stats) stats, the one decision path sluice local's gateway also takes.
// o carries the guard's options (logger, metrics, header dialects,
// stats). The result is a *ratelimit.Limiter; the App keeps ownership of
// every client (the Limiter's Close must not be called).
//
// Package ratelimit sets it in its init: its Limiter is built only
// through its own constructors, and this one takes internal types a
// public signature must not, as grpc-go's internal hooks do. Nil unless
// ratelimit is linked in.
var RateLimit func(a *App, cfg config.Config, o authapigw.Options) any

// Observing turns obs, a ratelimit.Observer, into the authorizer's
// Observe, with the outcomes package ratelimit gives its own decisions,
// so that sluice local's REST gateway reports to the same metrics as its
// middleware in the same terms. Set by package ratelimit's init, as
// RateLimit; nil unless ratelimit is linked in.
var Observing func(obs any) authapigw.Observe
