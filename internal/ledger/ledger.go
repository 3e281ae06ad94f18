// Package ledger holds global budgets in a DynamoDB table shared by every
// Region (an MRSC global table in production: multi-Region strong
// consistency).
//
// A budget is one item per key: how many tokens the Regions have taken
// from it, the last limit seen, and when its window ends. Regions take
// blocks of tokens with one conditional UpdateItem each (Take) and give
// unspent ones back (Give), so tokens are in exactly one place at a time.
// MRSC has no transactions and no TTL: every write here is a single-item
// conditional update, and Sweep deletes the items of ended windows.
//
// Under MRSC a write to an item that another Region writes at the same time
// fails with ReplicatedWriteConflictException; Table retries it with
// jittered exponential backoff, at most Options.MaxAttempts times, within
// the caller's context.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The item's attributes.
const (
	attrKey     = "pk"   // S: the budget's key
	attrUsed    = "used" // N: tokens taken and not given back
	attrLimit   = "lim"  // N: the limit of the last Take
	attrExpires = "exp"  // N: unix seconds when the window ends
	// attrHeldPrefix names, with a Region's name after it, the tokens that
	// Region held (pool and refundable usage) at its last write: what a
	// Reset keeps counted.
	attrHeldPrefix = "held_"
)

// heldAttr is the attribute holding region's tokens.
func heldAttr(region string) string {
	return attrHeldPrefix + cmp.Or(region, "-")
}

// Options configures a Table. The zero value of each field means its
// default.
type Options struct {
	// Table is the DynamoDB table's name. Required.
	Table string
	// Timeout bounds each DynamoDB request (one attempt); default 500ms.
	Timeout time.Duration
	// MaxAttempts bounds the requests one write sends while Regions
	// conflict (ReplicatedWriteConflictException): the first and the
	// retries; default 8.
	MaxAttempts int
	// Backoff is the longest wait before the first retry after a conflict;
	// it doubles with each retry up to MaxBackoff, and each wait is drawn
	// uniformly below it (full jitter). Default 10ms.
	Backoff time.Duration
	// MaxBackoff caps the wait between retries; default 200ms.
	MaxBackoff time.Duration
}

// Stats are a Table's counters since New.
type Stats struct {
	Calls     int64 // DynamoDB requests sent (each attempt counts)
	Takes     int64 // Take calls
	Gives     int64 // Give calls
	Conflicts int64 // ReplicatedWriteConflictException answers
	Retries   int64 // requests sent again after a conflict
	Errors    int64 // Take, Give, Used and Sweep calls that returned an error
}

// Table is a ledger table. It is safe for concurrent use.
type Table struct {
	db   api
	opts Options

	calls, takes, gives, conflicts, retries, errs atomic.Int64
}

// api lists the DynamoDB calls Table makes.
type api interface {
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// maxShrinks bounds how often one Take retries with what was left after
// its condition failed. Each failure means other takers got tokens in
// between, so the loop ends by itself unless Gives keep refilling the
// budget; this stops it then.
const maxShrinks = 64

// ErrContended is returned (wrapped) when a write gave up: Options.MaxAttempts
// requests all met a conflict, or a Take's budget kept changing under it.
var ErrContended = errors.New("ledger: item contended")

// New returns a Table on the DynamoDB table o.Table through c. Build c with
// the SDK's retries off (NewClient does) so that the Table's own retries and
// Stats are the whole story; it works either way.
func New(c *dynamodb.Client, o Options) *Table {
	// max(v, 0) makes a negative setting 0, which cmp.Or defaults.
	o.Timeout = cmp.Or(max(o.Timeout, 0), 500*time.Millisecond)
	o.MaxAttempts = cmp.Or(max(o.MaxAttempts, 0), 8)
	o.Backoff = cmp.Or(max(o.Backoff, 0), 10*time.Millisecond)
	o.MaxBackoff = cmp.Or(max(o.MaxBackoff, 0), 200*time.Millisecond)
	return &Table{db: c, opts: o}
}

// Stats returns the counters since New.
func (t *Table) Stats() Stats {
	return Stats{
		Calls:     t.calls.Load(),
		Takes:     t.takes.Load(),
		Gives:     t.gives.Load(),
		Conflicts: t.conflicts.Load(),
		Retries:   t.retries.Load(),
		Errors:    t.errs.Load(),
	}
}

// Take adds up to want tokens to key's used count, never past limit, in
// one conditional UpdateItem (add b only if used+b <= limit). When less
// than want is left it takes what is left, and it returns how many it took:
// 0 when the budget is spent, when limit is at or below the used count (a
// lowered limit), or when want or limit is not positive (no request then).
// expires is the end of the key's window, stored by the item's first Take
// and never changed after (the key names its window, so Sweep never
// deletes a window's item before it ends); limit is stored too, for the
// record. region and held record what the taking Region holds once the
// take lands: held plus the tokens taken (Reset keeps that counted).
//
// On an error nothing was taken, except when a request timed out or the
// connection broke after DynamoDB applied it: those tokens are in doubt,
// and the caller counts them stranded (under-admission, never
// over-admission).
func (t *Table) Take(ctx context.Context, key string, want, limit int64, expires time.Time, region string, held int64) (int64, error) {
	t.takes.Add(1)
	if want <= 0 || limit <= 0 {
		return 0, nil
	}
	b := min(want, limit)
	for range maxShrinks {
		used, ok, err := t.tryTake(ctx, key, b, limit, expires, region, held)
		if err != nil {
			t.errs.Add(1)
			return 0, fmt.Errorf("ledger: take %d from %s: %w", b, key, err)
		}
		if ok {
			return b, nil
		}
		left := limit - used
		if left <= 0 {
			// Spent: record what the Region holds now, so that a reset
			// starts the budget again without counting what it spent.
			if err := t.setHeld(ctx, key, region, held); err != nil {
				t.errs.Add(1)
				return 0, fmt.Errorf("ledger: take from %s: %w", key, err)
			}
			return 0, nil
		}
		b = min(want, left)
	}
	t.errs.Add(1)
	return 0, fmt.Errorf("ledger: take from %s: budget changed %d times under it: %w", key, maxShrinks, ErrContended)
}

// tryTake adds b to key's used count if used+b <= limit. It reports
// whether it did, and when not, the used count that stopped it (0 for an
// item that does not exist).
func (t *Table) tryTake(ctx context.Context, key string, b, limit int64, expires time.Time, region string, held int64) (used int64, ok bool, err error) {
	in := &dynamodb.UpdateItemInput{
		TableName: &t.opts.Table,
		Key:       keyOf(key),
		// exp is set once: a window's item keeps its end.
		UpdateExpression:    aws.String("SET #u = if_not_exists(#u, :zero) + :b, #l = :lim, #e = if_not_exists(#e, :exp), #h = :held"),
		ConditionExpression: aws.String("attribute_not_exists(#u) OR #u <= :max"),
		ExpressionAttributeNames: map[string]string{
			"#u": attrUsed, "#l": attrLimit, "#e": attrExpires, "#h": heldAttr(region),
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":zero": num(0),
			":b":    num(b),
			":lim":  num(limit),
			":max":  num(limit - b),
			":exp":  num(expires.Unix()),
			":held": num(max(held, 0) + b),
		},
		// DynamoDB returns the item that failed the condition, which saves
		// a read; dynalite ignores this and we read instead.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	err = t.update(ctx, in)
	if err == nil {
		return 0, true, nil
	}
	used, err = t.usedAfter(ctx, key, err)
	return used, false, err
}

// setHeld records that region holds held tokens of key's budget, when
// the item exists.
func (t *Table) setHeld(ctx context.Context, key, region string, held int64) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 &t.opts.Table,
		Key:                       keyOf(key),
		UpdateExpression:          aws.String("SET #h = :held"),
		ConditionExpression:       aws.String("attribute_exists(#u)"),
		ExpressionAttributeNames:  map[string]string{"#u": attrUsed, "#h": heldAttr(region)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":held": num(max(held, 0))},
	}
	if err := t.update(ctx, in); err != nil && !conditionFailed(err) {
		return fmt.Errorf("record held: %w", err)
	}
	return nil
}

// Give returns n unspent tokens to key: used -= n, never below 0, and
// records that region holds held tokens after it. Giving to a key without
// an item (swept, or never taken) does nothing. n <= 0 sends no request.
// On an error the tokens are in doubt, as for Take.
func (t *Table) Give(ctx context.Context, key string, n int64, region string, held int64) error {
	t.gives.Add(1)
	for range maxShrinks {
		if n <= 0 {
			return nil
		}
		in := &dynamodb.UpdateItemInput{
			TableName:                &t.opts.Table,
			Key:                      keyOf(key),
			UpdateExpression:         aws.String("SET #u = #u - :n, #h = :held"),
			ConditionExpression:      aws.String("#u >= :n"),
			ExpressionAttributeNames: map[string]string{"#u": attrUsed, "#h": heldAttr(region)},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":n": num(n), ":held": num(max(held, 0)),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		err := t.update(ctx, in)
		if err == nil {
			return nil
		}
		// Less than n is used (or no item): give back what is there.
		used, err := t.usedAfter(ctx, key, err)
		if err != nil {
			t.errs.Add(1)
			return fmt.Errorf("ledger: give %d to %s: %w", n, key, err)
		}
		n = min(n, used)
	}
	t.errs.Add(1)
	return fmt.Errorf("ledger: give to %s: used count changed %d times under it: %w", key, maxShrinks, ErrContended)
}

// usedAfter returns key's used count after err, a failed conditional
// write: from the item DynamoDB returned with the failure, else from a
// strongly consistent read. Any other error is returned as it is.
func (t *Table) usedAfter(ctx context.Context, key string, err error) (int64, error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return 0, err
	}
	if ccf.Item != nil {
		return numOf(ccf.Item, attrUsed)
	}
	return t.used(ctx, key)
}

// Reset starts key's window again in every Region: its used count becomes
// what the Regions held at their last writes (their pools and refundable
// usage, which stay theirs to spend), never more than it was. It returns
// that count. A Region's tokens spent since its last write are not
// counted again: a reset under-admits by at most those, never over-admits.
// It reads the item and writes it back on the condition that the count
// did not change, retrying while Regions take and give meanwhile.
func (t *Table) Reset(ctx context.Context, key string) (int64, error) {
	for range maxShrinks {
		item, err := t.item(ctx, key)
		if err != nil {
			t.errs.Add(1)
			return 0, fmt.Errorf("ledger: reset %s: %w", key, err)
		}
		if item == nil {
			return 0, nil
		}
		used, err := numOf(item, attrUsed)
		if err != nil {
			t.errs.Add(1)
			return 0, fmt.Errorf("ledger: reset %s: %w", key, err)
		}
		var held int64
		for name := range item {
			if h, err := numOf(item, name); err == nil && h > 0 && strings.HasPrefix(name, attrHeldPrefix) {
				held += h
			}
		}
		held = min(held, used)
		in := &dynamodb.UpdateItemInput{
			TableName:                 &t.opts.Table,
			Key:                       keyOf(key),
			UpdateExpression:          aws.String("SET #u = :held"),
			ConditionExpression:       aws.String("#u = :used"),
			ExpressionAttributeNames:  map[string]string{"#u": attrUsed},
			ExpressionAttributeValues: map[string]types.AttributeValue{":held": num(held), ":used": num(used)},
		}
		switch err := t.update(ctx, in); {
		case err == nil:
			return held, nil
		case !conditionFailed(err):
			t.errs.Add(1)
			return 0, fmt.Errorf("ledger: reset %s: %w", key, err)
		}
	}
	t.errs.Add(1)
	return 0, fmt.Errorf("ledger: reset %s: used count changed %d times under it: %w", key, maxShrinks, ErrContended)
}

// item reads key's item, strongly consistent; nil when there is none.
func (t *Table) item(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	t.calls.Add(1)
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.opts.Table, Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get item: %w", err)
	}
	return out.Item, nil
}

// Used returns key's used count from a strongly consistent read; 0 when
// there is no item.
func (t *Table) Used(ctx context.Context, key string) (int64, error) {
	n, err := t.used(ctx, key)
	if err != nil {
		t.errs.Add(1)
		return 0, fmt.Errorf("ledger: used of %s: %w", key, err)
	}
	return n, nil
}

// used reads key's used count (a whole item: DynamoDB bills a read by the
// item's size, projected or not).
func (t *Table) used(ctx context.Context, key string) (int64, error) {
	item, err := t.item(ctx, key)
	if err != nil {
		return 0, err
	}
	return numOf(item, attrUsed)
}

// Sweep deletes the items whose window ended before now (exp < now, to the
// second) and returns how many it deleted. It scans the whole table, a page
// a request, and deletes each item with a condition that its window still
// ended, so an item a Take just extended stays.
func (t *Table) Sweep(ctx context.Context, now time.Time) (int, error) {
	n, err := t.sweep(ctx, now)
	if err != nil {
		t.errs.Add(1)
		return n, fmt.Errorf("ledger: sweep %s: %w", t.opts.Table, err)
	}
	return n, nil
}

func (t *Table) sweep(ctx context.Context, now time.Time) (int, error) {
	values := map[string]types.AttributeValue{":now": num(now.Unix())}
	pages := dynamodb.NewScanPaginator(t.db, &dynamodb.ScanInput{
		TableName:                 &t.opts.Table,
		ProjectionExpression:      aws.String("#k"),
		FilterExpression:          aws.String("#e < :now"),
		ExpressionAttributeNames:  map[string]string{"#k": attrKey, "#e": attrExpires},
		ExpressionAttributeValues: values,
	})
	deleted := 0
	for pages.HasMorePages() {
		page, err := t.scanPage(ctx, pages)
		if err != nil {
			return deleted, err
		}
		for _, item := range page.Items {
			in := &dynamodb.DeleteItemInput{
				TableName:                 &t.opts.Table,
				Key:                       map[string]types.AttributeValue{attrKey: item[attrKey]},
				ConditionExpression:       aws.String("#e < :now"),
				ExpressionAttributeNames:  map[string]string{"#e": attrExpires},
				ExpressionAttributeValues: values,
			}
			err := t.write(ctx, func(ctx context.Context) error {
				_, err := t.db.DeleteItem(ctx, in)
				return err
			})
			switch {
			case err == nil:
				deleted++
			case conditionFailed(err): // extended or gone meanwhile
			default:
				return deleted, err
			}
		}
	}
	return deleted, nil
}

// scanPage reads pages' next page within Timeout.
func (t *Table) scanPage(ctx context.Context, pages *dynamodb.ScanPaginator) (*dynamodb.ScanOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	t.calls.Add(1)
	out, err := pages.NextPage(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	return out, nil
}

// write sends a write, each attempt under its own Timeout, and sends it
// again after a ReplicatedWriteConflictException, waiting a jittered,
// doubling backoff in between, up to MaxAttempts requests. It returns the
// last error otherwise (a ConditionalCheckFailedException unwrapped, for
// the caller to read).
func (t *Table) write(ctx context.Context, send func(context.Context) error) error {
	wait := t.opts.Backoff
	for attempt := 1; ; attempt++ {
		t.calls.Add(1)
		actx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
		err := send(actx)
		cancel()
		var conflict *types.ReplicatedWriteConflictException
		if !errors.As(err, &conflict) {
			return err
		}
		t.conflicts.Add(1)
		if attempt >= t.opts.MaxAttempts {
			return fmt.Errorf("%d attempts met a write from another Region: %w (%w)", attempt, ErrContended, err)
		}
		timer := time.NewTimer(rand.N(wait) + 1)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("waiting to retry after a conflict: %w", context.Cause(ctx))
		case <-timer.C:
		}
		t.retries.Add(1)
		wait = min(2*wait, t.opts.MaxBackoff)
	}
}

// update sends in through write.
func (t *Table) update(ctx context.Context, in *dynamodb.UpdateItemInput) error {
	return t.write(ctx, func(ctx context.Context) error {
		_, err := t.db.UpdateItem(ctx, in)
		return err
	})
}

// conditionFailed reports whether err is a write's failed condition.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrKey: &types.AttributeValueMemberS{Value: key}}
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// numOf reads item's number attribute name (the used count, a Region's
// held tokens); 0 when item or the attribute is missing.
func numOf(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is %T, want a number", name, v)
	}
	u, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return u, nil
}
