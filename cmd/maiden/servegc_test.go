package main

import (
	"runtime/debug"
	"testing"
)

// TestServeTunesGC: maiden serve raises the collector's target to
// serveGCPercent when GOGC is unset, and leaves an operator's GOGC alone.
func TestServeTunesGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Fatalf("GOGC unset: the collector's target is %d, want %d", got, serveGCPercent)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC=50 set by the operator: the target was changed to %d", got)
	}
}
