package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// NewClient returns a DynamoDB client in region with the SDK's own retries
// off (a Table retries conflicts itself and counts every request). With an
// endpoint (dynalite for tests and sluice local, "http://127.0.0.1:4567")
// it talks to that endpoint with static dummy credentials, which dynalite
// accepts; without one it loads the default AWS configuration (environment,
// shared files, the Lambda role) and uses DynamoDB's endpoint for region.
func NewClient(ctx context.Context, endpoint, region string) (*dynamodb.Client, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRegion(region),
		config.WithRetryMaxAttempts(1),
	}
	if endpoint != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("sluice", "local", "")))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("ledger: load AWS config: %w", err)
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// CreateTable creates the ledger table name (pk, a string, its hash key;
// billed on demand) and returns once it is ACTIVE, for tests and sluice
// local; production tables, MRSC global tables, come from the CDK app.
func CreateTable(ctx context.Context, c *dynamodb.Client, name string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return fmt.Errorf("ledger: create table %s: %w", name, err)
	}
	for {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("ledger: describe table %s: %w", name, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ledger: table %s is %s: %w", name, out.Table.TableStatus, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
