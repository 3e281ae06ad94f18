package limiter

import "sync"

// The pool below, with the callCtx it carries (callctx.go), is there for
// allocations: BenchmarkAllow in bench_test.go reports allocs/op. When this
// was written a 1-bucket decision made 11 allocations (480 B) with the pool
// and 18 (3.4 KB) without it; run that benchmark before changing this file.

// call is the per-call scratch space, pooled: the keys and the script
// arguments are built in one buffer. The keys become substrings of one
// string (one allocation for all of them); the arguments are handed to
// go-redis as pointers to encoding.BinaryMarshalers over the buffer, boxed
// once when the call is made (no allocation per call).
type call struct {
	buf    []byte
	keys   []string
	ends   []int
	argv   [1 + 4*MaxBuckets]argBytes
	boxed  [1 + 4*MaxBuckets]any // &argv[i]
	args   []any                 // boxed[:1+4n]
	ctx    callCtx
	keyEnd [MaxBuckets]int
}

// argBytes is one script argument, written by go-redis without a copy.
type argBytes []byte

// MarshalBinary returns the bytes themselves.
func (a *argBytes) MarshalBinary() ([]byte, error) { return *a, nil }

var callPool = sync.Pool{New: func() any {
	c := &call{
		buf:  make([]byte, 0, 512),
		keys: make([]string, 0, MaxBuckets),
		ends: make([]int, 0, 1+4*MaxBuckets),
	}
	for i := range c.argv {
		c.boxed[i] = &c.argv[i]
	}
	return c
}}

func getCall() *call { return callPool.Get().(*call) }

func putCall(c *call) {
	if c.ctx.timer != nil && !c.ctx.disarm() {
		return // its timer fired: let it go
	}
	callPool.Put(c)
}

// build fills c.keys with the bucket keys and c.args with the script's
// ARGV.
func (c *call) build(prefix string, sd subjectDigest, cost int64, bs []Bucket) {
	buf := append(c.buf[:0], prefix...)
	buf = append(buf, '{')
	buf = appendSubjectHash(buf, sd)
	buf = append(buf, "}:"...)
	head := len(buf)
	for i, b := range bs {
		if i > 0 {
			buf = append(buf, buf[:head]...)
		}
		buf = appendKeyID(buf, b)
		c.keyEnd[i] = len(buf)
	}
	keysEnd := len(buf)
	buf, c.ends = appendArgs(buf, c.ends[:0], cost, bs)
	c.buf = buf

	s := string(buf[:keysEnd])
	keys := c.keys[:0]
	from := 0
	for i := range bs {
		keys = append(keys, s[from:c.keyEnd[i]])
		from = c.keyEnd[i]
	}
	c.keys = keys
	from = keysEnd
	for i, end := range c.ends {
		c.argv[i] = buf[from:end]
		from = end
	}
	c.args = c.boxed[:len(c.ends)]
}
