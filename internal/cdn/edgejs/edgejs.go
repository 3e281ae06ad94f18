// Package edgejs runs the edge's CloudFront Function (internal/cdn) in an
// embedded JavaScript engine, goja, over a store read in process: the
// same source a stack deploys, for `sluice local --edge` and for the
// tests that hold it to the authorizer's reading of a subject.
package edgejs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/sluicehq/sluice/internal/cdn"
)

// Event is the part of a CloudFront viewer-request event the function
// reads.
type Event struct {
	Context struct {
		RequestID string `json:"requestId"`
	} `json:"context"`
	Viewer struct {
		IP string `json:"ip"`
	} `json:"viewer"`
	Request Request `json:"request"`
}

// Request is a viewer request: header names lower-cased, query values as
// sent (not decoded), each with every value when repeated.
type Request struct {
	Method      string           `json:"method"`
	URI         string           `json:"uri"`
	Headers     map[string]Field `json:"headers"`
	Querystring map[string]Field `json:"querystring"`
}

// Field is one header or query parameter.
type Field struct {
	Value      string  `json:"value"`
	MultiValue []Value `json:"multiValue,omitempty"`
}

// Value is one of a Field's values.
type Value struct {
	Value string `json:"value"`
}

// Response is what the function answers instead of the request.
type Response struct {
	StatusCode int                               `json:"statusCode"`
	Headers    map[string]struct{ Value string } `json:"headers"`
	Body       struct {
		Data string `json:"data"`
	} `json:"body"`
}

// Function is the edge function loaded in an engine. Its methods are
// safe for concurrent use (one engine, taken in turn).
type Function struct {
	mu      sync.Mutex
	vm      *goja.Runtime
	handler goja.Callable
	subject goja.Callable
}

// Getter reads the store as the function's kvs.get: the value, or an
// error for a missing key.
type Getter func(key string) (string, error)

// Load compiles src, the code cdn.Function generated, with the
// cloudfront module reading get and a crypto module with createHmac.
// now, when not nil, is the engine's Date.now (tests); nil the clock.
func Load(src string, get Getter, now func() time.Time) (*Function, error) {
	run, err := cdn.Runnable(src)
	if err != nil {
		return nil, err
	}
	vm := goja.New()
	mods := map[string]goja.Value{"cloudfront": cloudfront(vm, get), "crypto": cryptoModule(vm)}
	if err := vm.Set("require", func(name string) goja.Value {
		m, ok := mods[name]
		if !ok {
			panic(vm.NewGoError(fmt.Errorf("no module %q at the edge", name)))
		}
		return m
	}); err != nil {
		return nil, err
	}
	if now != nil {
		date := vm.Get("Date").ToObject(vm)
		if err := date.Set("now", func() int64 { return now().UnixMilli() }); err != nil {
			return nil, err
		}
	}
	if _, err := vm.RunScript("edge.js", run); err != nil {
		return nil, fmt.Errorf("load the edge function: %w", err)
	}
	f := &Function{vm: vm}
	var ok bool
	if f.handler, ok = goja.AssertFunction(vm.Get("handler")); !ok {
		return nil, fmt.Errorf("the edge function has no handler")
	}
	if f.subject, ok = goja.AssertFunction(vm.Get("subject")); !ok {
		return nil, fmt.Errorf("the edge function has no subject")
	}
	return f, nil
}

func cloudfront(vm *goja.Runtime, get Getter) goja.Value {
	m := vm.NewObject()
	_ = m.Set("kvs", func(string) goja.Value {
		h := vm.NewObject()
		_ = h.Set("get", func(key string) goja.Value {
			p, resolve, reject := vm.NewPromise()
			if v, err := get(key); err != nil {
				_ = reject(vm.NewGoError(err))
			} else {
				_ = resolve(v)
			}
			return vm.ToValue(p)
		})
		return h
	})
	return m
}

func cryptoModule(vm *goja.Runtime) goja.Value {
	m := vm.NewObject()
	_ = m.Set("createHmac", func(alg, key string) goja.Value {
		if alg != "sha256" {
			panic(vm.NewGoError(fmt.Errorf("createHmac(%q): only sha256 here", alg)))
		}
		var h hash.Hash = hmac.New(sha256.New, []byte(key))
		o := vm.NewObject()
		_ = o.Set("update", func(s string) goja.Value {
			h.Write([]byte(s))
			return o
		})
		_ = o.Set("digest", func(enc string) string {
			if enc != "hex" {
				panic(vm.NewGoError(fmt.Errorf("digest(%q): only hex here", enc)))
			}
			return hex.EncodeToString(h.Sum(nil))
		})
		return o
	})
	return m
}

// call runs fn on v, turned into a JavaScript value of the engine's own
// by JSON.parse. The caller holds f.mu.
func (f *Function) call(fn goja.Callable, v any) (goja.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	parse, _ := goja.AssertFunction(f.vm.Get("JSON").ToObject(f.vm).Get("parse"))
	arg, err := parse(goja.Undefined(), f.vm.ToValue(string(b)))
	if err != nil {
		return nil, err
	}
	return fn(goja.Undefined(), arg)
}

// Subject is the subject the function reads in r; ok false when it reads
// none (the request passes).
func (f *Function) Subject(r Request) (subject string, ok bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.call(f.subject, r)
	if err != nil {
		return "", false, err
	}
	if goja.IsNull(v) {
		return "", false, nil
	}
	return v.String(), true, nil
}

// Handle runs the handler on e: a Response when the edge denies, nil
// when the request passes.
func (f *Function) Handle(e Event) (*Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.call(f.handler, e)
	if err != nil {
		return nil, fmt.Errorf("edge handler: %w", err)
	}
	p, ok := v.Export().(*goja.Promise)
	if !ok {
		return nil, fmt.Errorf("edge handler returned %v, not a promise", v)
	}
	switch p.State() {
	case goja.PromiseStateFulfilled:
	case goja.PromiseStateRejected:
		return nil, fmt.Errorf("edge handler failed: %v", p.Result())
	default:
		return nil, fmt.Errorf("edge handler did not settle")
	}
	out := p.Result().ToObject(f.vm)
	if out.Get("statusCode") == nil || goja.IsUndefined(out.Get("statusCode")) {
		return nil, nil // the request: it passes
	}
	stringify, _ := goja.AssertFunction(f.vm.Get("JSON").ToObject(f.vm).Get("stringify"))
	s, err := stringify(goja.Undefined(), out)
	if err != nil {
		return nil, err
	}
	var r Response
	if err := json.Unmarshal([]byte(s.String()), &r); err != nil {
		return nil, fmt.Errorf("edge response: %w", err)
	}
	return &r, nil
}
