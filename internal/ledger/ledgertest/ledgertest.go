// Package ledgertest gives a test a ledger table of its own on the test
// DynamoDB API (dynalite, from scripts/testenv.sh), deleted when the test
// ends: nothing shared is touched.
package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/testenv"
)

// Table creates a ledger table on the test DynamoDB API, deleted when tb
// ends, and returns the API's URL and the table's name. Without
// SLUICE_TEST_DYNAMODB_URL it skips tb (fails it under
// SLUICE_REQUIRE_INTEGRATION=1).
func Table(tb testing.TB) (endpoint, name string) {
	tb.Helper()
	endpoint = testenv.DynamoDBURL(tb)
	c := Client(tb, endpoint)
	name = "sltest-ledger-" + testenv.Random(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ledger.CreateTable(ctx, c, name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			tb.Errorf("delete table %s: %v", name, err)
		}
	})
	return endpoint, name
}

// Client returns a DynamoDB client of endpoint, as ledger.NewClient makes
// one for a local endpoint.
func Client(tb testing.TB, endpoint string) *dynamodb.Client {
	tb.Helper()
	c, err := ledger.NewClient(context.Background(), endpoint, "us-east-1")
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
