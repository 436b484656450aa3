package benchfmt

import (
	"math"
	"testing"
)

func TestFormats(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Ratio(2.345), "2.35"},
		{Ratio(0.5), "0.50"},
		{Ratio(1.0 / 31.3), "1/31.3"},
		{Ratio(1.0 / 14700), "1/14700"},
		{Ratio(0), "0"},
		{Duration(31900), "31.9 µs"},
		{Duration(1.41e6), "1.41 ms"},
		{Duration(10.2e9), "10.2 s"},
		{Duration(-5), "-5.00 ns"},
		{Duration(math.NaN()), "–"},
		{Rate(25700), "25.7k"},
		{Rate(3.9e6), "3.90M"},
		{MiB(33.4), "33 MiB"},
		{Plural(1), ""},
		{Plural(2), "s"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if m := Median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("Median = %v", m)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
}
