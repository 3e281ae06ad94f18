package ratelimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestHandlerInFlight: a concurrency rule of 1 on POST /exports, created
// through the admin API, behind the middleware on a real HTTP server. One
// export in flight makes the next a 429 (Retry-After 1, the handler not
// called); its end frees the slot. A handler that panics, and a client
// that goes away mid-request, free theirs too: the next export passes at
// once rather than after the rule's 1 h TTL.
func TestHandlerInFlight(t *testing.T) {
	s := newSetup(t)
	s.addRules(t, map[string]any{"api": "shop", "route": "POST /exports", "subject": "*", "kind": "concurrency", "limit": 1, "period": "1h"})
	rl := s.limiterWith(t, ratelimit.Options{})
	entered, finish, returned := make(chan struct{}, 1), make(chan struct{}), make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exports", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("mode") {
		case "hold":
			entered <- struct{}{}
			<-finish
		case "panic":
			panic("export failed")
		case "wait":
			entered <- struct{}{}
			<-r.Context().Done()
			defer func() { returned <- struct{}{} }()
			return
		}
		io.WriteString(w, "exported")
	})
	srv := httptest.NewServer(rl.Handler(mux, ratelimit.HandlerOptions{API: "shop"}))
	defer srv.Close()
	post := func(ctx context.Context, mode string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/exports?mode="+mode, nil)
		req.Header.Set("X-Api-Key", "acme")
		resp, err := srv.Client().Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	ctx := context.Background()

	held := make(chan *http.Response, 1)
	go func() {
		resp, _ := post(ctx, "hold")
		held <- resp
	}()
	<-entered
	resp, err := post(ctx, "")
	if err != nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("a second export while one is in flight = %v %v, want 429 with Retry-After 1", resp, err)
	}
	close(finish)
	if r := <-held; r == nil || r.StatusCode != 200 {
		t.Fatalf("the held export = %v", r)
	}
	if resp, err := post(ctx, ""); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the first ended = %v %v, want 200: its slot is free", resp, err)
	}

	// A panic: net/http recovers it and drops the connection.
	if _, err := post(ctx, "panic"); err == nil {
		t.Fatal("a panicking handler answered")
	}
	if resp, err := post(ctx, ""); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after a panic = %v %v, want 200: the panicking request's slot is free", resp, err)
	}

	// The client goes away: the handler returns, and the slot is free.
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() {
		_, err := post(cctx, "wait")
		gone <- err
	}()
	<-entered
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	<-returned
	testenv.Await(t, 2*time.Second, 5*time.Millisecond, "an export passes after the client went away", func() bool {
		resp, err := post(ctx, "")
		return err == nil && resp.StatusCode == 200
	})
}

// TestLambdaInFlight: the REST proxy wrapper, fed aws-lambda-go's recorded
// event, frees the slot of a handler that panics and of one that returns.
func TestLambdaInFlight(t *testing.T) {
	s := newSetup(t)
	s.addRules(t, map[string]any{"api": "gy415nuibc", "route": "*", "subject": "*", "kind": "concurrency", "limit": 1, "period": "1h"})
	rl := s.limiterWith(t, ratelimit.Options{Sources: "ip"})
	ev := decode[events.APIGatewayProxyRequest](t, lambdaTestdata(t, "apigw-request.json"))
	ctx := context.Background()
	var inner int
	h := rl.LimitProxy(func(ctx context.Context, _ events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		inner++
		if inner == 1 {
			panic("handler failed")
		}
		return events.APIGatewayProxyResponse{StatusCode: 200}, nil
	}, ratelimit.HandlerOptions{})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the handler's panic did not reach the caller")
			}
		}()
		h(ctx, ev) //nolint:errcheck // it panics
	}()
	for i := range 3 {
		if r, err := h(ctx, ev); err != nil || r.StatusCode != 200 {
			t.Fatalf("request %d after a panic = %d %v, want 200: each ended request frees its slot", i+2, r.StatusCode, err)
		}
	}
}
