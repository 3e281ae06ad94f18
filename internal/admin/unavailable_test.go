package admin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/admin"
	"github.com/sluicehq/sluice/internal/rules"
	"github.com/sluicehq/sluice/internal/store"
)

// sqlError is a driver error with a SQLSTATE, as pgconn.PgError is.
type sqlError struct{ code, msg string }

func (e *sqlError) Error() string    { return e.msg + " (SQLSTATE " + e.code + ")" }
func (e *sqlError) SQLState() string { return e.code }

// erringStore fails every CreateRule with err.
type erringStore struct {
	store.Store
	err error
}

func (s erringStore) CreateRule(context.Context, rules.Rule, string) (rules.Rule, error) {
	return rules.Rule{}, fmt.Errorf("create rule: %w", s.err)
}

// TestDatabaseUnavailable: a database that cannot serve for now (stopped,
// starting, failed over, out of connections, the connection broken)
// answers 503 with Retry-After, so clients retry; any other store failure
// stays a 500.
func TestDatabaseUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"shutdown", &sqlError{"57P01", "FATAL: terminating connection due to administrator command"}, 503},
		{"crash", &sqlError{"57P02", "FATAL: terminating connection because of crash of another server process"}, 503},
		{"starting up", &sqlError{"57P03", "FATAL: the database system is starting up"}, 503},
		{"too many connections", &sqlError{"53300", "FATAL: sorry, too many clients already"}, 503},
		{"read-only after failover", &sqlError{"25006", "ERROR: cannot execute INSERT in a read-only transaction"}, 503},
		{"connection failure", &sqlError{"08006", "connection failure"}, 503},
		{"connection cut", io.ErrUnexpectedEOF, 503},
		{"a bug", &sqlError{"42703", "ERROR: column \"nope\" does not exist"}, 500},
		{"unknown", errors.New("boom"), 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := admin.New(erringStore{Store: mustMemory(), err: tc.err}, nil, nil, admin.Options{})
			resp := serve(svc, "POST", "/rules", http.Header{"Content-Type": {"application/json"}}, ruleBody)
			if resp.Status != tc.want || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("POST /rules with %v = %d %s, want %d problem+json", tc.err, resp.Status, resp.Body, tc.want)
			}
			if got := resp.Header.Get("Retry-After"); (tc.want == 503) != (got != "") {
				t.Errorf("POST /rules with %v: Retry-After %q, want one exactly on 503", tc.err, got)
			}
		})
	}
}
