package sandbox

import (
	"fmt"

	"github.com/maiden-run/maiden/internal/wasmscan"
)

// CheckBinary refuses a component whose instantiation would hold more
// per-instance state than maiden allows: core instances, globals, tables and
// their elements, memories, data and element segments, and the host memory
// they cost by estimate (wasmscan.DefaultLimits). That state lives in the
// host, outside linear memory, where memory_mb does not reach it (a module of
// a million globals instantiated a hundred times took 2.6 GB), so it is
// bounded by reading the bytes, before anything is instantiated. The error
// wraps ErrInvalidTool, so a call reports it as kind invalid.
//
// The compile cache calls it with the bytes it compiles or finds compiled
// (a disk-cache hit still reads the bytes for its digest); scanning is
// linear in the size and far cheaper than compiling.
func CheckBinary(b []byte) error {
	if err := wasmscan.CheckLimits(b); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTool, err)
	}
	return nil
}
