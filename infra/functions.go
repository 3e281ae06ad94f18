// What each function may use (its secrets, Redis, the ledger) and the
// settings the functions share.

package main

import (
	"maps"

	"github.com/sluicehq/sluice/infra/sluice"
	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/envvar"
)

// access is what one function may use: each gets what its code calls and
// nothing else, so that a function (its code, or a caller who found a flaw
// in it) cannot do what its routes do not.
type access struct {
	// write: the database's owner login (rules and plans are written, or
	// the schema migrated); else the read-only role's (migration 00007).
	write bool
	// redis: Redis, its AUTH token and the subject hash key (buckets
	// read, reset or charged; the rules snapshot published).
	redis bool
	// stats: CloudWatch (Contributor Insights) alone: no database, no
	// Redis, no VPC.
	stats bool
	// key: with stats, the subject hash key too (POST /subjects/find
	// hashes the subject it looks for in the top denied subjects).
	key bool
	// sign: the rules signing key (the rules snapshot is published
	// signed): the rule writers alone.
	sign bool
	// ledger: what it does with the ledger of global budgets, in a
	// family of Regions (Global).
	ledger ledgerUse
	// publish: with redis, Redis alone, not the subject hash key: the
	// edge publisher, which moves hashed entries to the edge's store.
	publish bool
}

// ledgerUse is what a function does with the ledger of global budgets.
type ledgerUse int

const (
	noLedger     ledgerUse = iota
	ledgerDecide           // takes and gives back blocks, sweeps ended windows
	ledgerRead             // shows and resets a subject's global budget: GetItem, UpdateItem
)

// actions are the DynamoDB actions of u, nil for none.
func (u ledgerUse) actions() []string {
	switch u {
	case ledgerDecide:
		return sluice.LedgerDecideActions
	case ledgerRead:
		return sluice.LedgerReadActions
	}
	return nil
}

// adminAccess says what each admin function, a privilege class of
// routes (admin.Routes), may use. Rules and plans are read on the
// read-only role alone; their writes take the owner's login, Redis and
// the rules signing key, to publish the snapshot; the subject and usage routes read rules
// (read-only role) and work on buckets (Redis); GET /stats and POST
// /subjects/find read CloudWatch, the latter hashing with the subject
// key. A function missing here fails the synth.
var adminAccess = map[string]access{
	admin.FunctionRead:     {},
	admin.FunctionWrite:    {write: true, redis: true, sign: true},
	admin.FunctionSubjects: {redis: true, ledger: ledgerRead},
	admin.FunctionStats:    {stats: true, key: true},
}

// functionAccess is what every function may use, by function name: the
// decision functions read rules and decide on Redis, migrate owns the
// schema and publishes the rules snapshot after migrating (so a fresh
// stack's authorizers find one), and each admin function has its
// adminAccess.
var functionAccess = func() map[string]access {
	m := map[string]access{
		"authorizer": {redis: true, ledger: ledgerDecide},
		"check":      {redis: true, ledger: ledgerDecide},
		"migrate":    {write: true, redis: true, sign: true},
		// Only with -c edge=cloudfront (edge.go).
		edgePublisher: {redis: true, publish: true},
	}
	maps.Copy(m, adminAccess)
	return m
}()

// jwtProps are the authorizer's JWT settings, or nil.
func jwtProps(p *StackProps) *sluice.JWT {
	if p.JWTIssuer == "" {
		return nil
	}
	return &sluice.JWT{Issuer: p.JWTIssuer, Audience: envvar.List(p.JWTAudience), TokenUse: p.JWTTokenUse, JWKSURL: p.JWTJWKSURL}
}

// adminTimeout is the admin functions' timeout in seconds: under API
// Gateway's 29 s integration limit, so that a call that runs out (a
// database resuming from its pause in about 15 s, then the query) ends
// with the function's own error and log line rather than the gateway's
// 504 with the function still running.
const adminTimeout = 25
