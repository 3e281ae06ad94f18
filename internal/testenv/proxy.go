package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP to a target and can be taken down and back up on the
// same address: a server that goes away and comes back, as its clients see
// it. SetDelay makes it a slow server instead. It starts down.
type Proxy struct {
	addr, target string
	delay        atomic.Int64 // ns added before each reply chunk is forwarded
	mu           sync.Mutex
	l            net.Listener
	conns        map[net.Conn]bool
}

// SetDelay holds every chunk the target sends back for d before the client
// gets it (0, the default, forwards at once): each request/reply round trip
// takes d longer, as over a congested link or from a stalled server. It
// applies to connections already open, from their next chunk.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// NewProxy returns a Proxy to target on a free loopback port, down; it is
// taken down when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{addr: l.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	l.Close()
	t.Cleanup(p.Down)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Up accepts connections again, on the same address.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	var l net.Listener
	var err error
	for range 100 { // the port may linger a moment after down
		if l, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("proxy up: %v", err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *Proxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	p.copyDelayed(c, s)
	c.Close()
}

// copyDelayed copies the target's replies to the client, each chunk held
// for the current delay.
func (p *Proxy) copyDelayed(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(p.delay.Load()); d > 0 {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Down closes the listener and every connection through it.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}
