package stats

import "container/heap"

// spaceSaving is the Space-Saving summary of Metwally, Agrawal and El
// Abbadi ("Efficient computation of frequent and top-k elements in data
// streams", 2005): at most capacity counters; an item not counted takes
// over the smallest counter and adds one to it.
//
// Why not a plain map capped at some size: the caller controls the
// subject, so a flood of one-shot subjects would fill a capped map early
// in the slot and hide the real offender arriving later, or, evicting at
// random, push it out. Space-Saving keeps every item seen more than
// N/capacity times (N the slot's denials) whatever the order, with counts
// over by at most N/capacity, in fixed memory and O(log capacity) per
// denial.
type spaceSaving struct {
	capacity int
	entries  []*ssEntry // a min-heap on count
	index    map[subjectKey]*ssEntry
}

type ssEntry struct {
	key   subjectKey
	shown string // the subject as sent, when the authorizer shows it
	count int64
	pos   int // position in entries
}

func (s *spaceSaving) reset(capacity int) {
	s.capacity = capacity
	s.entries = s.entries[:0]
	clear(s.index)
}

func (s *spaceSaving) add(k subjectKey, shown string) {
	if s.index == nil {
		s.index = make(map[subjectKey]*ssEntry)
	}
	if s.capacity <= 0 {
		s.capacity = DefaultSubjects
	}
	if e := s.index[k]; e != nil {
		e.count++
		heap.Fix((*ssHeap)(s), e.pos)
		return
	}
	if len(s.entries) < s.capacity {
		e := &ssEntry{key: k, shown: shown, count: 1}
		s.index[k] = e
		heap.Push((*ssHeap)(s), e)
		return
	}
	// Take over the smallest counter: the newcomer may have been seen up
	// to that many times before, and was not counted.
	e := s.entries[0]
	delete(s.index, e.key)
	e.key, e.shown = k, shown
	e.count++
	s.index[k] = e
	heap.Fix((*ssHeap)(s), 0)
}

// ssHeap is the heap.Interface view of a spaceSaving's entries.
type ssHeap spaceSaving

func (h *ssHeap) Len() int           { return len(h.entries) }
func (h *ssHeap) Less(i, j int) bool { return h.entries[i].count < h.entries[j].count }
func (h *ssHeap) Swap(i, j int) {
	h.entries[i], h.entries[j] = h.entries[j], h.entries[i]
	h.entries[i].pos, h.entries[j].pos = i, j
}
func (h *ssHeap) Push(x any) {
	e := x.(*ssEntry)
	e.pos = len(h.entries)
	h.entries = append(h.entries, e)
}
func (h *ssHeap) Pop() any {
	e := h.entries[len(h.entries)-1]
	h.entries = h.entries[:len(h.entries)-1]
	return e
}
