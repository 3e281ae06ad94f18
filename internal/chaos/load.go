package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one request of the load client's history, written one JSON
// object a line.
type Op struct {
	// Seq numbers the ops in the order they were sent.
	Seq int64 `json:"seq"`
	// Host is the decision host the request was sent to (d1..d3): the
	// instance that decided.
	Host string `json:"host"`
	// Subject and Route are what was asked (the API is the scenario's).
	Subject string `json:"subject"`
	Route   string `json:"route"`
	// Send and Recv are the wall-clock times (Unix ns) the request was
	// sent and its answer read (or the error seen).
	Send int64 `json:"send"`
	Recv int64 `json:"recv"`
	// Status is the HTTP status; 0 when no answer came.
	Status int `json:"status"`
	// The check API's answer.
	Allowed  bool   `json:"allowed"`
	FailOpen bool   `json:"failOpen,omitempty"`
	Reset    int64  `json:"reset"` // seconds; 0 on a fail-closed deny
	Rule     string `json:"rule,omitempty"`
	Policy   string `json:"policy,omitempty"` // the RateLimit-Policy field
	// Err says why there was no answer ("shed" when the client had too
	// many requests in flight to send it at its time).
	Err string `json:"err,omitempty"`
}

// Answered reports whether a decision came back (200 or 429).
func (o *Op) Answered() bool {
	return o.Status == http.StatusOK || o.Status == http.StatusTooManyRequests
}

// Degraded reports whether the decision was not one Redis made: no
// answer, a fail-open allow, or a fail-closed deny (the check API answers
// reset 0 only then: a real deny waits for a bucket that is not full).
func (o *Op) Degraded() bool {
	return !o.Answered() || o.FailOpen || !o.Allowed && o.Reset == 0
}

// FailClosed reports a deny made because Redis could not answer.
func (o *Op) FailClosed() bool { return o.Answered() && !o.Allowed && o.Reset == 0 }

// CheckBody is a check API request.
type CheckBody struct {
	Subject string `json:"subject"`
	API     string `json:"api"`
	Route   string `json:"route"`
}

// CheckAnswer is the part of a check API answer the history keeps.
type CheckAnswer struct {
	Status   int
	Allowed  bool   `json:"allowed"`
	FailOpen bool   `json:"failOpen"`
	Reset    int64  `json:"reset"`
	Rule     string `json:"rule"`
	Policy   string `json:"-"`
}

// check sends one check API request to url with client and reads the
// answer.
func check(ctx context.Context, client *http.Client, url string, body CheckBody) (CheckAnswer, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return CheckAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return CheckAnswer{}, err
	}
	defer resp.Body.Close()
	b, err = io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return CheckAnswer{Status: resp.StatusCode}, err
	}
	a := CheckAnswer{Status: resp.StatusCode, Policy: resp.Header.Get("RateLimit-Policy")}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusTooManyRequests {
		if err := json.Unmarshal(b, &a); err != nil {
			return a, fmt.Errorf("decode check answer: %w", err)
		}
		a.Status = resp.StatusCode
	}
	return a, nil
}

// LoadConfig is what the load client runs, written by the harness as JSON.
type LoadConfig struct {
	// Targets are the decision hosts' check API URLs, by host name.
	Targets []Target `json:"targets"`
	// API is the API id every request names.
	API string `json:"api"`
	// Streams are the subjects and their request rates.
	Streams []Stream `json:"streams"`
	// Duration is how long requests are sent.
	Duration time.Duration `json:"duration"`
	// MaxOps bounds the history: no request is sent past it.
	MaxOps int64 `json:"maxOps"`
	// Timeout bounds one request.
	Timeout time.Duration `json:"timeout"`
	// MaxInFlight bounds the requests in flight; a request due while it
	// is reached is recorded as shed, not sent.
	MaxInFlight int `json:"maxInFlight"`
	// Out is the history file (JSON lines, in Seq order).
	Out string `json:"out"`
}

// Target is one decision host.
type Target struct {
	Host string `json:"host"`
	URL  string `json:"url"`
}

// Stream is one subject's requests: Rate a second on Route, sent to the
// targets in turn.
type Stream struct {
	Subject string  `json:"subject"`
	Route   string  `json:"route"`
	Rate    float64 `json:"rate"`
	// Hosts, when not empty, are the only targets the stream sends to
	// (a Region's decision hosts); From and Until, when not 0, are when
	// it starts and stops, from the start of the load (a drain).
	Hosts       []string      `json:"hosts,omitempty"`
	From, Until time.Duration `json:",omitempty"`
}

// targetsOf returns the targets s sends to.
func targetsOf(all []Target, s Stream) []Target {
	if len(s.Hosts) == 0 {
		return all
	}
	return slices.DeleteFunc(slices.Clone(all), func(t Target) bool { return !slices.Contains(s.Hosts, t.Host) })
}

// runLoad is the load client: open-loop streams, every request recorded.
func runLoad(ctx context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load config: %w", err)
	}
	var c LoadConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("load config %s: %w", path, err)
	}
	ops, err := Load(ctx, c)
	if err != nil {
		return err
	}
	return WriteHistory(c.Out, ops)
}

// Load sends c's streams for c.Duration (or until ctx ends) and returns
// every op, in Seq order.
func Load(ctx context.Context, c LoadConfig) ([]Op, error) {
	if len(c.Targets) == 0 || len(c.Streams) == 0 || c.Duration <= 0 {
		return nil, errors.New("load: no targets, no streams or no duration")
	}
	client := &http.Client{
		Timeout: c.Timeout,
		Transport: &http.Transport{
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: c.MaxInFlight,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	defer client.CloseIdleConnections()
	var (
		seq      atomic.Int64
		inFlight atomic.Int64
		mu       sync.Mutex
		ops      = make([]Op, 0, min(c.MaxOps, 1<<20))
		wg       sync.WaitGroup
	)
	record := func(o Op) {
		mu.Lock()
		ops = append(ops, o)
		mu.Unlock()
	}
	begin := time.Now()
	end := begin.Add(c.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	for i, s := range c.Streams {
		targets := targetsOf(c.Targets, s)
		if len(targets) == 0 {
			return nil, fmt.Errorf("load: stream %s has no target among %v", s.Subject, s.Hosts)
		}
		wg.Go(func() {
			every := time.Duration(float64(time.Second) / s.Rate)
			// A random phase, so streams of one rate do not send together.
			next := begin.Add(s.From + time.Duration(rand.Int64N(int64(every))))
			turn := i
			for {
				if s.Until > 0 && next.After(begin.Add(s.Until)) {
					return
				}
				select {
				case <-runCtx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(every)
				n := seq.Add(1)
				if n > c.MaxOps {
					return
				}
				t := targets[turn%len(targets)]
				turn++
				o := Op{Seq: n, Host: t.Host, Subject: s.Subject, Route: s.Route, Send: time.Now().UnixNano()}
				if inFlight.Load() >= int64(c.MaxInFlight) {
					o.Recv, o.Err = o.Send, "shed"
					record(o)
					continue
				}
				inFlight.Add(1)
				wg.Go(func() {
					defer inFlight.Add(-1)
					record(send(ctx, client, t.URL, CheckBody{Subject: s.Subject, API: c.API, Route: s.Route}, o))
				})
			}
		})
	}
	wg.Wait()
	slices.SortFunc(ops, func(a, b Op) int { return int(a.Seq - b.Seq) })
	return ops, nil
}

func send(ctx context.Context, client *http.Client, url string, body CheckBody, o Op) Op {
	o.Send = time.Now().UnixNano()
	a, err := check(ctx, client, url, body)
	o.Recv = time.Now().UnixNano()
	o.Status, o.Allowed, o.FailOpen, o.Reset, o.Rule, o.Policy = a.Status, a.Allowed, a.FailOpen, a.Reset, a.Rule, a.Policy
	if err != nil {
		o.Err = err.Error()
	} else if !o.Answered() {
		o.Err = "status " + strconv.Itoa(a.Status)
	}
	return o
}

// WriteHistory writes ops to path, one JSON object a line.
func WriteHistory(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

// ReadHistory reads a history WriteHistory wrote.
func ReadHistory(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ops []Op
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var o Op
		if err := dec.Decode(&o); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return nil, fmt.Errorf("history %s: %w", path, err)
		}
		ops = append(ops, o)
	}
}
