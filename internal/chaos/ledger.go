package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluicehq/sluice/internal/ledger"
	"github.com/sluicehq/sluice/internal/ledger/ledgerproxy"
)

// The ledger host of the multi-Region topology runs dynalite on its
// loopback and this role beside it: one ledgerproxy per Region (Region i
// on ledgerPort+i), so that the proxies' counters are each Region's ledger
// calls, and a control API on ledgerPort the harness sets the faults with.
const (
	ledgerPort    = 8000
	dynalitePort  = 4567
	ledgerTable   = "chaos-ledger"
	ledgerAddrVar = "SLUICE_CHAOS_LEDGER_ADDR" // the ledger host's address
)

// LedgerFault is what the ledger role's proxies add, set with POST
// /fault (a JSON body); the zero value is none.
type LedgerFault struct {
	// Conflict is the share of UpdateItems answered with
	// ReplicatedWriteConflictException.
	Conflict float64 `json:"conflict,omitempty"`
	// P50 and P99, when P50 > 0, delay each request by a log-normal draw.
	P50 time.Duration `json:"p50,omitempty"`
	P99 time.Duration `json:"p99,omitempty"`
}

// LedgerItem is one item of the ledger table: a global budget's window.
type LedgerItem struct {
	Key  string `json:"key"`
	Used int64  `json:"used"`
}

// runLedger creates the ledger table on the dynalite at 127.0.0.1, then
// serves the Regions' proxies and the control API until ctx ends.
func runLedger(ctx context.Context) error {
	target := "http://127.0.0.1:" + strconv.Itoa(dynalitePort)
	db, err := ledger.NewClient(ctx, target, "us-east-1")
	if err != nil {
		return err
	}
	err = poll(ctx, 60*time.Second, 200*time.Millisecond, nil, func() error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := ledger.CreateTable(cctx, db, ledgerTable); err != nil && !strings.Contains(err.Error(), "ResourceInUse") {
			return fmt.Errorf("create the ledger table: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var delay atomic.Pointer[func() time.Duration]
	proxies := make([]*ledgerproxy.Proxy, len(regions))
	ip := os.Getenv(ledgerAddrVar)
	errc := make(chan error, len(regions)+2)
	var servers []*http.Server
	serveOn := func(ip string, port int, h http.Handler) error {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, s)
		go func() { errc <- s.Serve(ln) }()
		return nil
	}
	// dynalite (4.0.0) throws, and exits, when a client drops a request it
	// is reading ("Error: aborted", index.js: req.on('error', ...throw)),
	// which a proxy does whenever a Region's take times out. DynamoDB does
	// not; a shim between the proxies and dynalite finishes every request
	// the proxies started.
	if err := serveOn("127.0.0.1", dynalitePort+1, shim(target)); err != nil {
		return err
	}
	for i := range regions {
		p, err := ledgerproxy.New(ledgerproxy.Options{Target: "http://127.0.0.1:" + strconv.Itoa(dynalitePort+1), Delay: func() time.Duration {
			if d := delay.Load(); d != nil {
				return (*d)()
			}
			return 0
		}})
		if err != nil {
			return err
		}
		proxies[i] = p
		if err := serveOn(ip, ledgerPort+i+1, p); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /fault", func(w http.ResponseWriter, r *http.Request) {
		var f LedgerFault
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if f.P50 > 0 {
			d := ledgerproxy.LogNormal(f.P50, max(f.P99, f.P50))
			delay.Store(&d)
		} else {
			delay.Store(nil)
		}
		for _, p := range proxies {
			p.SetConflict(f.Conflict)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		out := make([]ledgerproxy.Stats, len(proxies))
		for i, p := range proxies {
			out[i] = p.Stats()
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		items, err := scanLedger(r.Context(), db)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(items)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, r *http.Request) {
		if _, err := db.DeleteTable(r.Context(), &dynamodb.DeleteTableInput{TableName: aws.String(ledgerTable)}); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if err := poll(r.Context(), 10*time.Second, 50*time.Millisecond, nil, func() error {
			return ledger.CreateTable(r.Context(), db, ledgerTable)
		}); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	})
	if err := serveOn(ip, ledgerPort, mux); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "ledger: serving")
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	for _, s := range servers {
		_ = s.Close()
	}
	return nil
}

// scanLedger reads every item of the ledger table.
func scanLedger(ctx context.Context, db *dynamodb.Client) ([]LedgerItem, error) {
	var out []LedgerItem
	pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(ledgerTable), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", ledgerTable, err)
		}
		for _, it := range page.Items {
			k, _ := it["pk"].(*types.AttributeValueMemberS)
			u, _ := it["used"].(*types.AttributeValueMemberN)
			if k == nil || u == nil {
				continue
			}
			n, _ := strconv.ParseInt(u.Value, 10, 64)
			out = append(out, LedgerItem{Key: k.Value, Used: n})
		}
	}
	return out, nil
}

// shim forwards to target, reading each request's body first and never
// cancelling a request once sent (the answer to a client that left is
// dropped).
func shim(target string) http.Handler {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		defer cancel()
		r2 := r.Clone(ctx)
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		// Only the ResponseWriter: ReverseProxy cancels on a
		// CloseNotifier's signal when the context cannot be cancelled.
		rp.ServeHTTP(struct{ http.ResponseWriter }{w}, r2)
	})
}
