// Package benchfmt formats benchmark numbers for maiden's benchmark tables
// (bench/cmd/table and bench/compare/cmd/table): medians, durations, rates
// and ratios with about three significant digits, so that every table reads
// the same way.
package benchfmt

import (
	"math"
	"slices"
	"strconv"
)

// Median is the median of v; NaN for none.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Plural is "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Ratio formats a ratio with about three significant digits; below 0.1 as
// a fraction, 1/N, which reads better than 6.6e-05.
func Ratio(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x >= 0.1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x > 0:
		n := 1 / x
		if n >= 1000 { // three significant digits
			unit := math.Pow(10, math.Floor(math.Log10(n))-2)
			return "1/" + strconv.FormatFloat(math.Round(n/unit)*unit, 'f', 0, 64)
		}
		return "1/" + Sig(n)
	default:
		return "0"
	}
}

// Duration formats nanoseconds with a unit (ns, µs, ms, s); NaN as a dash.
func Duration(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "–"
	case ns < 0:
		return "-" + Duration(-ns)
	case ns >= 1e9:
		return Sig(ns/1e9) + " s"
	case ns >= 1e6:
		return Sig(ns/1e6) + " ms"
	case ns >= 1e3:
		return Sig(ns/1e3) + " µs"
	default:
		return Sig(ns) + " ns"
	}
}

// Rate formats a per-second rate with k or M; NaN as a dash.
func Rate(x float64) string {
	switch {
	case math.IsNaN(x):
		return "–"
	case x >= 1e6:
		return Sig(x/1e6) + "M"
	case x >= 1e3:
		return Sig(x/1e3) + "k"
	default:
		return Sig(x)
	}
}

// MiB formats a size in MiB; NaN as a dash.
func MiB(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 0, 64) + " MiB"
}

// Sig formats x with three significant digits (x >= 0.001).
func Sig(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case x >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}
