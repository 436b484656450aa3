package budget

import (
	"testing"

	"github.com/maiden-run/maiden/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL cluster BenchmarkFetchPays's
// postgres rows start (none of the tests start one).
func TestMain(m *testing.M) { pgtest.Main(m) }
