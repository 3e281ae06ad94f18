// Package kvs is the edge tier's CloudFront KeyValueStore on AWS: the
// cdn.Store the Publisher writes, over the SDK's data-plane client
// (cloudfront-keyvaluestore, signed with SigV4A: the SDK derives the
// ECDSA key from the function's ordinary credentials).
package kvs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore"
	"github.com/aws/aws-sdk-go-v2/service/cloudfrontkeyvaluestore/types"

	"github.com/sluicehq/sluice/internal/cdn"
)

// api is the part of the SDK client the Store calls.
type api interface {
	DescribeKeyValueStore(context.Context, *cloudfrontkeyvaluestore.DescribeKeyValueStoreInput, ...func(*cloudfrontkeyvaluestore.Options)) (*cloudfrontkeyvaluestore.DescribeKeyValueStoreOutput, error)
	UpdateKeys(context.Context, *cloudfrontkeyvaluestore.UpdateKeysInput, ...func(*cloudfrontkeyvaluestore.Options)) (*cloudfrontkeyvaluestore.UpdateKeysOutput, error)
}

// Options configure a Store. Each default is on its field.
type Options struct {
	// Endpoint, when set, is the data plane's base URL instead of the
	// one the SDK derives from the store's ARN (tests).
	Endpoint string
}

// timeout bounds one call, retries included.
const timeout = 5 * time.Second

// Store is a KeyValueStore named by its ARN. It is safe for concurrent
// use; the Publisher calls it from one goroutine.
type Store struct {
	c   api
	arn string
}

// New returns the Store of the KeyValueStore arn
// (arn:aws:cloudfront::<account>:key-value-store/<id>) on cfg's
// credentials.
func New(cfg aws.Config, storeARN string, o Options) (*Store, error) {
	a, err := arn.Parse(storeARN)
	if err != nil || a.Service != "cloudfront" || len(a.Resource) <= len("key-value-store/") || a.Resource[:len("key-value-store/")] != "key-value-store/" {
		return nil, fmt.Errorf("edge store %q: want arn:aws:cloudfront::<account>:key-value-store/<id>", storeARN)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // the store is global; the SDK signs for every Region ("*")
	}
	c := cloudfrontkeyvaluestore.NewFromConfig(cfg, func(co *cloudfrontkeyvaluestore.Options) {
		if o.Endpoint != "" {
			co.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return &Store{c: c, arn: storeARN}, nil
}

// Load is New on the default credentials chain (a Lambda's role).
func Load(ctx context.Context, storeARN string, o Options) (*Store, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("edge store: load AWS config: %w", err)
	}
	return New(cfg, storeARN, o)
}

// ETag implements cdn.Store: DescribeKeyValueStore's ETag.
func (s *Store) ETag(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := s.c.DescribeKeyValueStore(ctx, &cloudfrontkeyvaluestore.DescribeKeyValueStoreInput{KvsARN: aws.String(s.arn)})
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", s.arn, err)
	}
	if aws.ToString(out.ETag) == "" {
		return "", fmt.Errorf("describe %s: no ETag in the answer", s.arn)
	}
	return *out.ETag, nil
}

// Update implements cdn.Store: one UpdateKeys if-match etag, all or
// nothing. The service's ConflictException (the ETag moved) is
// cdn.ErrConflict.
func (s *Store) Update(ctx context.Context, etag string, puts map[string]string, deletes []string) (string, error) {
	if n := len(puts) + len(deletes); n == 0 || n > cdn.MaxBatch {
		return "", fmt.Errorf("update of %d keys: want 1 to %d", n, cdn.MaxBatch)
	}
	in := &cloudfrontkeyvaluestore.UpdateKeysInput{KvsARN: aws.String(s.arn), IfMatch: aws.String(etag)}
	for _, k := range slices.Sorted(maps.Keys(puts)) {
		in.Puts = append(in.Puts, types.PutKeyRequestListItem{Key: aws.String(k), Value: aws.String(puts[k])})
	}
	for _, k := range deletes {
		in.Deletes = append(in.Deletes, types.DeleteKeyRequestListItem{Key: aws.String(k)})
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := s.c.UpdateKeys(ctx, in)
	if err != nil {
		if _, ok := errors.AsType[*types.ConflictException](err); ok {
			return "", fmt.Errorf("update %s: %w", s.arn, errors.Join(cdn.ErrConflict, err))
		}
		return "", fmt.Errorf("update %s: %w", s.arn, err)
	}
	if aws.ToString(out.ETag) == "" {
		return "", fmt.Errorf("update %s: no ETag in the answer", s.arn)
	}
	return *out.ETag, nil
}
