package local

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice/internal/authorizer"
	authapigw "github.com/sluicehq/sluice/internal/authorizer/apigw"
	"github.com/sluicehq/sluice/ratelimit"
)

// observeREST tells obs (the Prometheus metrics of /metrics) of the REST
// authorizer's decisions (apigw.Options.Observe), as the middleware tells
// it of the HTTP API's and the service's: the same series for every demo
// API. The outcomes are the middleware's (package ratelimit's decision):
// an upstream authorizer's refusal is no decision and is not told.
func observeREST(obs ratelimit.Observer) authapigw.Observe {
	return func(req *authorizer.Request, res *authorizer.Result, err error, took time.Duration) {
		d := ratelimit.Decision{API: req.API, Rule: res.Rule, FailOpen: res.FailOpen, Cached: res.Cached,
			LimiterTime: res.LimiterTime, Duration: took}
		switch {
		case errors.Is(err, authorizer.ErrNoSubject):
			d.Outcome = ratelimit.OutcomeUnauthorized
		case !res.Allowed:
			d.Outcome = ratelimit.OutcomeDeny
			d.FailClosed = err != nil
		case res.ShadowDenied:
			d.Outcome = ratelimit.OutcomeShadowDeny
		default:
			d.Outcome = ratelimit.OutcomeAllow
		}
		obs.ObserveDecision(d)
	}
}
