package main

import (
	"encoding/json"
	"net/http"
	"runtime"
)

// debugVars are the process's vital signs, served by `sluice local` at
// /admin/debug/vars (behind the admin token) for `make soak`, which samples
// them to show that goroutines and memory stay flat under load.
type debugVars struct {
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
}

// debugVarsHandler answers GET with the current debugVars as JSON. Reading
// the memory statistics stops the world for a few microseconds: a sampler
// every few seconds costs nothing measurable.
func debugVarsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(debugVars{ //nolint:errcheck // the client has gone
			Goroutines:     runtime.NumGoroutine(),
			HeapAllocBytes: m.HeapAlloc,
			HeapObjects:    m.HeapObjects,
			SysBytes:       m.Sys,
			NumGC:          m.NumGC,
		})
	})
}
