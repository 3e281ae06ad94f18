package cdn

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// MemoryStore is a KeyValueStore in memory, with the service's ETag and
// batch rules: sluice local's store, which its function reads through
// Get. A write reaches Get at once.
type MemoryStore struct {
	mu      sync.Mutex
	version int
	size    int
	items   map[string]string
}

// ErrNotFound is what Get returns for a key the store does not hold, as
// the function's kvs.get rejects.
var ErrNotFound = errors.New("key not found")

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
	grow := 0
	for k, v := range puts {
		if len(k) > 512 || len(v) > MaxValueBytes {
			return "", fmt.Errorf("key %q: key or value too long", k)
		}
		grow += len(k) + len(v)
	}
	if m.size+grow > MaxStoreBytes { // as the service's quota error: nothing written
		return "", fmt.Errorf("store of %d bytes cannot take %d more: over %d", m.size, grow, MaxStoreBytes)
	}
	if m.items == nil {
		m.items = map[string]string{}
	}
	for k, v := range puts {
		m.remove(k)
		m.items[k] = v
		m.size += len(k) + len(v)
	}
	for _, k := range deletes {
		m.remove(k)
	}
	m.version++
	return strconv.Itoa(m.version), nil
}

// remove deletes key from the items, and its bytes from the size.
func (m *MemoryStore) remove(key string) {
	if old, ok := m.items[key]; ok {
		m.size -= len(key) + len(old)
		delete(m.items, key)
	}
}

// Get returns key's value as the edge reads it, or ErrNotFound.
func (m *MemoryStore) Get(key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	return len(m.items)
}
