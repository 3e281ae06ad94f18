package local

import (
	"encoding/json"
	"net/http"
	"runtime"

	"github.com/sluicehq/sluice/internal/limiter"
)

// DebugVars are the process's vital signs, served by `sluice local` at
// /admin/debug/vars (behind the admin token) for `make soak`, which samples
// them to show that goroutines and memory stay flat under load.
type DebugVars struct {
	// Goroutines is runtime.NumGoroutine().
	Goroutines int `json:"goroutines"`
	// HeapAllocBytes and HeapObjects are the live Go heap
	// (runtime.MemStats.HeapAlloc, HeapObjects).
	HeapAllocBytes uint64 `json:"heap_alloc_bytes"`
	HeapObjects    uint64 `json:"heap_objects"`
	// SysBytes is the memory the Go runtime holds from the OS.
	SysBytes uint64 `json:"sys_bytes"`
	// NumGC counts the garbage collections so far.
	NumGC uint32 `json:"num_gc"`
	// The limiter's token leases since start (limiter.Stats): decisions
	// allowed from a lease without a Redis call, leases taken, unused
	// tokens given back, and tokens held by leases now.
	LeasedAdmissions    uint64 `json:"leased_admissions"`
	LeasesTaken         uint64 `json:"leases_taken"`
	LeaseTokensReturned uint64 `json:"lease_tokens_returned"`
	LeaseTokensHeld     int64  `json:"lease_tokens_held"`
}

// debugVarsHandler answers GET with the current DebugVars as JSON. Reading
// the memory statistics stops the world for a few microseconds: a sampler
// every few seconds costs nothing measurable.
func debugVarsHandler(lim *limiter.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		ls := lim.Stats()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(DebugVars{ //nolint:errcheck // the client has gone
			Goroutines:          runtime.NumGoroutine(),
			HeapAllocBytes:      m.HeapAlloc,
			HeapObjects:         m.HeapObjects,
			SysBytes:            m.Sys,
			NumGC:               m.NumGC,
			LeasedAdmissions:    ls.Leased,
			LeasesTaken:         ls.Leases,
			LeaseTokensReturned: ls.LeaseReturned,
			LeaseTokensHeld:     ls.LeaseOutstanding,
		})
	})
}
