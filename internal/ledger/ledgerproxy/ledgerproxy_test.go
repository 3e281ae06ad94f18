package ledgerproxy_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgerproxy"
	"github.com/sluicehq/sluice/internal/testenv"
)

// setup creates a ledger table of the test's own and returns a proxy to the
// test dynalite with o, and an SDK client through it.
func setup(t *testing.T, o ledgerproxy.Options) (*ledgerproxy.Proxy, *dynamodb.Client, string) {
	t.Helper()
	o.Target = testenv.DynamoDBURL(t)
	ctx := context.Background()
	direct, err := ledger.NewClient(ctx, o.Target, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	name := "sltest-proxy-" + testenv.Random(t)
	if err := ledger.CreateTable(ctx, direct, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := direct.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	p, err := ledgerproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	c, err := ledger.NewClient(ctx, s.URL, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	return p, c, name
}

func update(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
		UpdateExpression:          aws.String("ADD used :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	return err
}

// TestConflictTyped: the SDK decodes the injected answer as DynamoDB's own,
// a *types.ReplicatedWriteConflictException, and reads pass untouched.
func TestConflictTyped(t *testing.T) {
	t.Parallel()
	p, c, table := setup(t, ledgerproxy.Options{Conflict: 1})
	ctx := context.Background()
	err := update(ctx, c, table)
	var conflict *types.ReplicatedWriteConflictException
	if !errors.As(err, &conflict) {
		t.Fatalf("UpdateItem through a conflicting proxy = %v (%T), want a *types.ReplicatedWriteConflictException", err, err)
	}
	if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}}); err != nil {
		t.Errorf("GetItem through the proxy = %v, want it forwarded", err)
	}
	p.SetConflict(0)
	if err := update(ctx, c, table); err != nil {
		t.Errorf("UpdateItem after SetConflict(0) = %v", err)
	}
	if st := p.Stats(); st != (ledgerproxy.Stats{Requests: 3, Forwarded: 2, Conflicts: 1}) {
		t.Errorf("Stats() = %+v, want 3 requests, 2 forwarded, 1 conflict", st)
	}
}

// TestTableRetries: a Table gets through a 50% conflict rate, retrying
// exactly the conflicts the proxy injected.
func TestTableRetries(t *testing.T) {
	t.Parallel()
	p, c, table := setup(t, ledgerproxy.Options{Conflict: 0.5})
	tbl := ledger.New(c, ledger.Options{Table: table, MaxAttempts: 30, Backoff: time.Millisecond})
	ctx := context.Background()
	for range 20 {
		if got, err := tbl.Take(ctx, "k", 1, 100, time.Now().Add(time.Hour), "r", 0); err != nil || got != 1 {
			t.Fatalf("Take = %d, %v; want 1", got, err)
		}
	}
	if used, err := tbl.Used(ctx, "k"); err != nil || used != 20 {
		t.Errorf("Used = %d, %v; want 20", used, err)
	}
	st, ps := tbl.Stats(), p.Stats()
	if st.Conflicts == 0 || st.Conflicts != ps.Conflicts || st.Retries != st.Conflicts || st.Errors != 0 {
		t.Errorf("Table Stats() = %+v, proxy %+v; want every injected conflict seen and retried", st, ps)
	}
}

// TestDown: while down the client sees a broken connection, not an answer.
func TestDown(t *testing.T) {
	t.Parallel()
	p, c, table := setup(t, ledgerproxy.Options{})
	ctx := context.Background()
	p.SetDown(true)
	err := update(ctx, c, table)
	var api interface{ ErrorCode() string }
	if err == nil || errors.As(err, &api) {
		t.Fatalf("UpdateItem while down = %v, want a connection error, not an API error", err)
	}
	p.SetDown(false)
	if err := update(ctx, c, table); err != nil {
		t.Errorf("UpdateItem back up = %v", err)
	}
	if st := p.Stats(); st.Refused != 1 || st.Forwarded != 1 {
		t.Errorf("Stats() = %+v, want 1 refused, 1 forwarded", st)
	}
}

// TestDelay: each request waits what Delay returns.
func TestDelay(t *testing.T) {
	t.Parallel()
	_, c, table := setup(t, ledgerproxy.Options{Delay: func() time.Duration { return 150 * time.Millisecond }})
	start := time.Now()
	if err := update(context.Background(), c, table); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("UpdateItem through a 150ms delay took %v", took)
	}
}

func TestLogNormal(t *testing.T) {
	t.Parallel()
	d := ledgerproxy.LogNormal(20*time.Millisecond, 500*time.Millisecond)
	const n = 20000
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d()
	}
	slices.Sort(s)
	p50, p99 := s[n/2], s[n*99/100]
	if p50 < 17*time.Millisecond || p50 > 23*time.Millisecond || p99 < 380*time.Millisecond || p99 > 650*time.Millisecond {
		t.Errorf("LogNormal(20ms, 500ms): p50 %v, p99 %v over %d draws", p50, p99, n)
	}
	if c := ledgerproxy.LogNormal(time.Millisecond, time.Millisecond)(); c != time.Millisecond {
		t.Errorf("LogNormal(1ms, 1ms)() = %v, want 1ms", c)
	}
}

func TestNewBadTarget(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"", "127.0.0.1:4567", "://x"} {
		if _, err := ledgerproxy.New(ledgerproxy.Options{Target: target}); err == nil {
			t.Errorf("New(Target %q) = nil error", target)
		}
	}
}
