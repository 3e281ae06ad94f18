package cardinality

import (
	"strconv"
	"sync"
	"testing"
)

// TestKeep: the first Max distinct values are kept, every later one is
// other, however many goroutines ask at once.
func TestKeep(t *testing.T) {
	s := &Set{Max: 10}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				s.Keep(strconv.Itoa((i+g)%50), "other")
			}
		})
	}
	wg.Wait()
	kept := 0
	for i := range 50 {
		if s.Keep(strconv.Itoa(i), "other") != "other" {
			kept++
		}
	}
	if kept != 10 {
		t.Errorf("kept %d distinct values, want Max = 10", kept)
	}
	if got := s.Keep("new", "other"); got != "other" {
		t.Errorf("Keep(new) on a full set = %q, want other", got)
	}
}
