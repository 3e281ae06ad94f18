// Package ledgerproxy puts what MRSC does and dynalite doesn't in front of
// dynalite: an HTTP reverse proxy that answers a chosen share of UpdateItem
// requests with ReplicatedWriteConflictException, as DynamoDB does when
// another Region writes the same item at once, delays requests (a slow or
// distant ledger), and can refuse every connection (a Region cut off from
// the ledger).
package ledgerproxy

import (
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// updateItem is the X-Amz-Target of the requests that can conflict.
const updateItem = "DynamoDB_20120810.UpdateItem"

// conflictBody is DynamoDB's answer to a write that met another Region's.
var conflictBody = []byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ReplicatedWriteConflictException",` +
	`"message":"Transaction conflict: the item is being modified by a request in another Region (injected by ledgerproxy)"}`)

// Options configures a Proxy.
type Options struct {
	// Target is the base URL of the DynamoDB API to forward to, such as
	// http://127.0.0.1:4567. Required.
	Target string
	// Conflict is the share of UpdateItem requests, from 0 (the default,
	// none) to 1 (all), answered with ReplicatedWriteConflictException
	// instead of being forwarded. SetConflict changes it later.
	Conflict float64
	// Delay, when not nil, is called for each request and holds it that
	// long before it is answered or forwarded (or until the client gives
	// up). LogNormal makes one from a p50 and a p99.
	Delay func() time.Duration
}

// Stats are a Proxy's counters since New.
type Stats struct {
	Requests  int64 // requests received, refused ones included
	Forwarded int64 // requests sent on to Target
	Conflicts int64 // UpdateItems answered with ReplicatedWriteConflictException
	Refused   int64 // connections closed without an answer while down
}

// Proxy is an http.Handler forwarding to a DynamoDB API with faults added.
// It is safe for concurrent use.
type Proxy struct {
	rp    *httputil.ReverseProxy
	delay func() time.Duration

	conflict atomic.Uint64 // math.Float64bits of the share
	down     atomic.Bool
	next     atomic.Int32 // a Fault for the next UpdateItem, 0 for none

	requests, forwarded, conflicts, refused atomic.Int64
}

// New returns a Proxy to o.Target.
func New(o Options) (*Proxy, error) {
	u, err := url.Parse(o.Target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("ledgerproxy: target %q is not a base URL like http://127.0.0.1:4567 (%v)", o.Target, err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	// The target unreachable, or the client gone: a bare 502, no log line.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	p := &Proxy{rp: rp, delay: o.Delay}
	p.SetConflict(o.Conflict)
	return p, nil
}

// SetConflict sets the share of UpdateItem requests answered with a
// conflict, clamped to [0, 1].
func (p *Proxy) SetConflict(share float64) {
	p.conflict.Store(math.Float64bits(min(max(share, 0), 1)))
}

// Fault is a one-time fault of the next UpdateItem (FailNext).
type Fault int32

// The faults FailNext injects.
const (
	// Drop closes the connection without forwarding the write: it was
	// not applied, and the client can't tell.
	Drop Fault = iota + 1
	// LoseReply forwards the write and closes the connection instead of
	// answering: it was applied, and the client can't tell.
	LoseReply
	// Conflict answers ReplicatedWriteConflictException (not applied).
	Conflict
)

// FailNext arms f for the next UpdateItem (a Take or Give): the one after
// it is served as ever. FailNext(0) disarms it.
func (p *Proxy) FailNext(f Fault) { p.next.Store(int32(f)) }

// SetDown makes the proxy refuse (true) or serve (false) requests. While
// down it closes each HTTP/1 connection without an answer, so that clients
// see a broken connection, as when cut off from the ledger.
func (p *Proxy) SetDown(down bool) { p.down.Store(down) }

// Stats returns the counters since New.
func (p *Proxy) Stats() Stats {
	return Stats{
		Requests:  p.requests.Load(),
		Forwarded: p.forwarded.Load(),
		Conflicts: p.conflicts.Load(),
		Refused:   p.refused.Load(),
	}
}

// ServeHTTP refuses r while down, else waits Delay, then answers an
// UpdateItem with a conflict at the Conflict share, else forwards r.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if p.down.Load() {
		p.refuse(w)
		return
	}
	if p.delay != nil {
		if d := p.delay(); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
	write := r.Header.Get("X-Amz-Target") == updateItem
	var fault Fault
	if write {
		fault = Fault(p.next.Swap(0))
	}
	switch fault {
	case Drop:
		p.refuse(w)
		return
	case LoseReply:
		p.forwarded.Add(1)
		p.rp.ServeHTTP(discard{h: http.Header{}}, r)
		p.refuse(w)
		return
	}
	if write && (fault == Conflict || rand.Float64() < math.Float64frombits(p.conflict.Load())) {
		p.conflicts.Add(1)
		h := w.Header()
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(conflictBody)), 10))
		h.Set("X-Amzn-Requestid", "ledgerproxy-"+strconv.FormatUint(rand.Uint64(), 36))
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(conflictBody)
		return
	}
	p.forwarded.Add(1)
	p.rp.ServeHTTP(w, r)
}

// discard is a ResponseWriter that keeps nothing: the answer LoseReply
// loses.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// refuse closes the client's connection without an answer.
func (p *Proxy) refuse(w http.ResponseWriter) {
	p.refused.Add(1)
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil { // not HTTP/1 (a recorder in a test): answer 503 instead
		http.Error(w, "ledgerproxy: down", http.StatusServiceUnavailable)
		return
	}
	_ = conn.Close()
}

// LogNormal returns a Delay drawing from the log-normal distribution with
// the given median and 99th percentile (p99 >= p50 > 0), the shape of
// network and service latency: LogNormal(20*time.Millisecond,
// 500*time.Millisecond) is a ledger slow at p99.
func LogNormal(p50, p99 time.Duration) func() time.Duration {
	mu := math.Log(float64(p50))
	sigma := 0.0
	if p99 > p50 {
		sigma = (math.Log(float64(p99)) - mu) / 2.3263478740408408 // z of 0.99
	}
	return func() time.Duration {
		return time.Duration(math.Round(math.Exp(mu + sigma*rand.NormFloat64())))
	}
}
