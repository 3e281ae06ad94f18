package cdn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// MemoryStore is a KeyValueStore in memory, with the service's ETag and
// batch rules: sluice local's store, which its function reads through
// Get. Delay, when set, holds each write back from Get as propagation to
// the edge locations does.
type MemoryStore struct {
	// Delay is how long a write takes to reach Get; zero at once.
	Delay time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time

	mu      sync.Mutex
	version int
	size    int
	items   map[string]string
	pending []write
}

type write struct {
	at     time.Time
	key    string
	value  string
	delete bool
}

// ErrNotFound is what Get returns for a key the store does not hold, as
// the function's kvs.get rejects.
var ErrNotFound = errors.New("key not found")

func (m *MemoryStore) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// ETag implements Store.
func (m *MemoryStore) ETag(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strconv.Itoa(m.version), nil
}

// Update implements Store, with the service's limits: MaxBatch keys, a
// value of at most MaxValueBytes, a store of at most MaxStoreBytes.
func (m *MemoryStore) Update(_ context.Context, etag string, puts map[string]string, deletes []string) (string, error) {
	if n := len(puts) + len(deletes); n == 0 || n > MaxBatch {
		return "", fmt.Errorf("update of %d keys: want 1 to %d", n, MaxBatch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if etag != strconv.Itoa(m.version) {
		return "", ErrConflict
	}
	m.flush()
	grow := 0
	for k, v := range puts {
		if len(k) > 512 || len(v) > MaxValueBytes {
			return "", fmt.Errorf("key %q: key or value too long", k)
		}
		grow += len(k) + len(v)
	}
	for _, w := range m.pending {
		if !w.delete {
			grow += len(w.key) + len(w.value)
		}
	}
	if m.size+grow > MaxStoreBytes { // as the service's quota error: nothing written
		return "", fmt.Errorf("store of %d bytes cannot take %d more: over %d", m.size, grow, MaxStoreBytes)
	}
	at := m.now().Add(m.Delay)
	for k, v := range puts {
		m.pending = append(m.pending, write{at: at, key: k, value: v})
	}
	for _, k := range deletes {
		m.pending = append(m.pending, write{at: at, key: k, delete: true})
	}
	m.version++
	m.flush()
	return strconv.Itoa(m.version), nil
}

// flush applies the writes whose delay is over.
func (m *MemoryStore) flush() {
	if m.items == nil {
		m.items = map[string]string{}
	}
	now := m.now()
	i := 0
	for ; i < len(m.pending) && !m.pending[i].at.After(now); i++ {
		w := m.pending[i]
		if old, ok := m.items[w.key]; ok {
			m.size -= len(w.key) + len(old)
			delete(m.items, w.key)
		}
		if !w.delete {
			m.items[w.key] = w.value
			m.size += len(w.key) + len(w.value)
		}
	}
	m.pending = m.pending[i:]
}

// Get returns key's value as the edge reads it, or ErrNotFound.
func (m *MemoryStore) Get(key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush()
	v, ok := m.items[key]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

// Len and Size are the entries the edge reads and their bytes.
func (m *MemoryStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flush()
	return len(m.items)
}
