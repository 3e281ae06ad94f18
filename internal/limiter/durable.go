package limiter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durable charges.
//
// Redis replicates asynchronously: a primary acknowledges a write before
// any replica has it, so a failover (Sentinel promoting a replica after
// the primary dies) or a split brain (an old primary that keeps taking
// writes until it is demoted) can lose charges Redis already answered,
// and a subject may be admitted again up to what it spent in that window.
// A request with a Durable bucket (a quota that bills) is acknowledged
// only once a replica has the charge: the script call is pipelined with
// WAIT 1 <ms> (one round trip carries both), and an admission no replica
// acknowledged within the wait is a Redis failure: the buckets' failure
// mode decides (a quota that fails closed denies; the charge stays on the
// primary, so the error is never an over-admission). Sentinel promotes the
// replica with the most data, so an acknowledged charge survives the
// primary's loss as long as a replica that has it is promoted. WAIT is
// not a consensus: a charge can still be lost when every replica that has
// it is lost too.
//
// Durable requests are never leased (a lease would admit tokens whose
// WAIT it did not run). On Redis Cluster the pipeline goes to the node
// that holds the subject's slot.

// ErrNotReplicated is returned, with the failure-mode decision, when no
// replica acknowledged a durable admission within the Limiter's timeout.
var ErrNotReplicated = errors.New("limiter: no replica acknowledged the durable charge")

// chargeDurable runs the charge script for c (built and armed) with WAIT;
// an admission no replica acknowledged returns its reply with
// ErrNotReplicated.
func (l *Limiter) chargeDurable(c *call) (string, error) {
	res, acks, err := l.evalDurable(c)
	if err != nil {
		return "", err
	}
	if acks < 1 && strings.HasPrefix(res, "1 ") { // the reply starts with allowed (charge.lua)
		return res, ErrNotReplicated
	}
	return res, nil
}

// durable reports whether an enforcing bucket of bs is Durable.
func durable(bs []Bucket) bool {
	return slices.ContainsFunc(bs, func(b Bucket) bool { return b.Durable && !b.Shadow })
}

// evalDurable runs the charge script for c and WAIT 1 in one pipeline and returns the
// script's reply and the number of replicas that acknowledged everything
// the connection wrote before WAIT. c is built and armed. WAIT blocks for
// at most three quarters of the call's budget; a WAIT still unanswered at
// the budget's end counts as no acknowledgement.
func (l *Limiter) evalDurable(c *call) (string, int64, error) {
	ctx := &c.ctx
	pl, err := l.pipeliner(ctx, c.keys[0])
	if err != nil {
		return "", 0, err
	}
	wait := max(time.Until(c.ctx.deadline)*3/4, time.Millisecond)
	for _, sha := range []bool{true, false} {
		p := pl.Pipeline()
		var script *redis.Cmd
		if sha {
			script = p.EvalSha(ctx, chargeScript.Hash(), c.keys, c.args...)
		} else {
			// NOSCRIPT: EVAL sends the body and loads it, as
			// redis.Script.Run falls back to.
			script = p.Eval(ctx, chargeSrc, c.keys, c.args...)
		}
		acks := p.Do(ctx, "wait", 1, wait.Milliseconds())
		_, _ = p.Exec(ctx)
		res, _ := script.Val().(string)
		err := script.Err()
		if sha && err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			continue
		}
		n, werr := acks.Int64()
		var ne net.Error
		switch {
		case res != "" && werr == nil:
			return res, n, nil
		case res != "" && (errors.As(werr, &ne) && ne.Timeout() || errors.Is(werr, context.DeadlineExceeded)):
			// The script answered and WAIT did not in time (go-redis then
			// flags every command of the pipeline with the timeout, the
			// script's reply kept): Redis ends a WAIT at its next event
			// loop tick (every 100 ms at the default hz 10) when no
			// replica acknowledges, which can be past the call's budget.
			// No replica acknowledged: that is the answer, not a fault of
			// the connection.
			return res, 0, nil
		case err != nil:
			return "", 0, err
		default:
			return "", 0, fmt.Errorf("wait for a replica: %w", werr)
		}
	}
	return "", 0, errors.New("script not loaded") // not reached
}

// pipeliner returns the client whose pipeline carries a durable call:
// the client itself, or on Redis Cluster the primary of key's slot (WAIT
// has no key, so a cluster pipeline would send it to any node).
func (l *Limiter) pipeliner(ctx context.Context, key string) (interface{ Pipeline() redis.Pipeliner }, error) {
	if cc, ok := l.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("find the node of %s: %w", key, err)
		}
		return node, nil
	}
	p, ok := l.rdb.(interface{ Pipeline() redis.Pipeliner })
	if !ok {
		return nil, fmt.Errorf("durable charge: %T cannot pipeline", l.rdb)
	}
	return p, nil
}
