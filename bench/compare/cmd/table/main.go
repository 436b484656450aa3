// Command table turns the output of bench/compare's benchmarks (go test
// -bench, benchmarks named Compare/WORKLOAD/ROW/gN) into the markdown table
// in bench/compare/README.md: one line per workload and row, 1 and 2
// goroutines side by side. The input is several rounds concatenated, each
// announced by a "# round N" line (./run writes them); without such lines
// the k-th result of each benchmark counts as round k, as with -count.
//
//	./run                                   # does all of this
//	go test -run '^$' -bench . -count 3 . | go run ./cmd/table
//
// Every figure is the median over rounds of each round's p50, p99, calls/s
// and peak-rss-MiB. Spread is half the range of the rounds' p50 around
// their median. A ratio divides a row's p50 at one goroutine by another
// row's from the same round (so drift between rounds cancels out), median
// over rounds, the rounds' min–max in brackets; below 1 is faster.
//
// The row's name says what it is compared with: ROW-LANG is compared with
// maiden-LANG (maiden in-process, the same workload, guest code in the same
// language); rows named *-reused-* reuse instances, native-* have no sandbox,
// every other row makes a fresh instance per call.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/maiden-run/maiden/bench/internal/benchfmt"
)

// related names, for a row, other rows of the same workload whose ratio
// goes in the notes, and what that ratio means.
var related = map[string][]note{
	"maiden-go":                   {{"maiden-wat", ""}, {"maiden-nopreinit-go", "before pre-initialisation"}},
	"maiden-js":                   {{"maiden-wat", ""}},
	"maiden-wat":                  {{"maiden-noepoch-wat", "epoch tax"}, {"wazero-fresh-wat", ""}},
	"maiden-mcp-stdio-wat":        {{"native-mcp-stdio-go", ""}, {"native-mcp-stdio-child-go", "floor with the tool in another process"}},
	"maiden-mcp-stdio-inproc-wat": {{"native-mcp-stdio-go", ""}},
	"maiden-mcp-http-wat":         {{"native-mcp-http-go", ""}},
	"maiden-mcp-stdio-go":         {{"native-mcp-stdio-go", ""}},
	"maiden-mcp-http-go":          {{"native-mcp-http-go", ""}},
	"extism-reused-wat":           {{"extism-fresh-wat", ""}},
	"extism-fresh-wat":            {{"extism-notimeout-wat", "CloseOnContextDone tax"}},
	"wazero-reused-wat":           {{"wazero-fresh-wat", ""}},
	"wazero-fresh-wat":            {{"wazero-noclose-wat", "CloseOnContextDone tax"}},
	"native-go":                   {{"maiden-wat", ""}},
	"native-mcp-stdio-go":         {{"maiden-mcp-stdio-go", ""}, {"maiden-mcp-stdio-wat", ""}},
	"native-mcp-stdio-child-go":   {{"native-mcp-stdio-go", "the hop to the child"}},
	"native-mcp-http-go":          {{"maiden-mcp-http-go", ""}, {"maiden-mcp-http-wat", ""}},
}

type note struct{ row, meaning string }

// sample is one round's result for one benchmark.
type sample struct {
	round   int
	metrics map[string]float64
}

// key identifies one benchmark: a row of a workload at g goroutines.
type key struct {
	workload, row string
	g             int
}

func main() {
	res, order, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "table: no benchmark results in the input")
		os.Exit(1)
	}
	write(os.Stdout, res, order)
}

var nameRE = regexp.MustCompile(`^BenchmarkCompare/([^/]+)/([^/]+)/g(\d+)(-\d+)?$`)

// parse reads benchmark results; order lists each workload/row pair once,
// in order of first appearance.
func parse(r io.Reader) (map[key][]sample, [][2]string, error) {
	res := map[key][]sample{}
	var order [][2]string
	seen := map[[2]string]bool{}
	round, marked := 1, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# round "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, nil, fmt.Errorf("bad line %q", line)
			}
			round, marked = n, true
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		m := nameRE.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line
		}
		g, _ := strconv.Atoi(m[3])
		k := key{m[1], m[2], g}
		s := sample{round: round, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("bad value %q in %q", f[i], line)
			}
			s.metrics[f[i+1]] = v
		}
		if !marked {
			s.round = len(res[k]) + 1
		}
		res[k] = append(res[k], s)
		if wr := [2]string{k.workload, k.row}; !seen[wr] {
			seen[wr] = true
			order = append(order, wr)
		}
	}
	return res, order, sc.Err()
}

func write(w io.Writer, res map[key][]sample, order [][2]string) {
	fmt.Fprintln(w, "| workload | row | instance | p50 | p99 | calls/s | p50 (2 g.) | p99 (2 g.) | calls/s (2 g.) | peak RSS (1 / 2 g.) | spread of p50 (1 / 2 g.) | p50 vs maiden in-process, same round | notes |")
	fmt.Fprintln(w, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|---|")
	for _, wr := range order {
		wl, row := wr[0], wr[1]
		g1, g2 := res[key{wl, row, 1}], res[key{wl, row, 2}]
		cells := []string{wl, row, instance(row),
			benchfmt.Duration(medianOf(g1, "p50-ns")), benchfmt.Duration(medianOf(g1, "p99-ns")), benchfmt.Rate(medianOf(g1, "calls/s")),
			benchfmt.Duration(medianOf(g2, "p50-ns")), benchfmt.Duration(medianOf(g2, "p99-ns")), benchfmt.Rate(medianOf(g2, "calls/s")),
			benchfmt.MiB(medianOf(g1, "peak-rss-MiB")) + " / " + benchfmt.MiB(medianOf(g2, "peak-rss-MiB")),
			spread(g1) + " / " + spread(g2),
		}
		base := "maiden-" + lang(row)
		switch {
		case base == row:
			cells = append(cells, "baseline")
		case res[key{wl, base, 1}] != nil:
			cells = append(cells, ratio(g1, res[key{wl, base, 1}], base))
		default:
			cells = append(cells, "")
		}
		var notes []string
		for _, n := range related[row] {
			if other := res[key{wl, n.row, 1}]; other != nil {
				s := ratio(g1, other, n.row)
				if n.meaning != "" {
					s += " (" + n.meaning + ")"
				}
				notes = append(notes, s)
			}
		}
		if strings.HasPrefix(row, "maiden-mcp-") {
			if base := res[key{wl, base, 1}]; base != nil {
				notes = append(notes, fmt.Sprintf("%+.0f µs over in-process", (medianOf(g1, "p50-ns")-medianOf(base, "p50-ns"))/1e3))
			}
		}
		if g2 != nil {
			if r, _, _, ok := ratioOf(g2, g1, "calls/s"); ok {
				notes = append(notes, fmt.Sprintf("2 g.: %s× the calls/s of 1", benchfmt.Ratio(r)))
			}
		}
		if n := len(g1); n > 0 && n < rounds(res) {
			notes = append(notes, fmt.Sprintf("%d round%s", n, benchfmt.Plural(n)))
		}
		cells = append(cells, strings.Join(notes, "; "))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

// lang is the language suffix of a row name: wat, go or js.
func lang(row string) string { return row[strings.LastIndexByte(row, '-')+1:] }

func instance(row string) string {
	switch {
	case strings.HasPrefix(row, "native-"):
		return "no sandbox"
	case strings.Contains(row, "-reused-"):
		return "**reused**"
	default:
		return "fresh"
	}
}

func rounds(res map[key][]sample) int {
	n := 0
	for _, ss := range res {
		for _, s := range ss {
			n = max(n, s.round)
		}
	}
	return n
}

func values(ss []sample, metric string) []float64 {
	var v []float64
	for _, s := range ss {
		if x, ok := s.metrics[metric]; ok {
			v = append(v, x)
		}
	}
	return v
}

func medianOf(ss []sample, metric string) float64 { return benchfmt.Median(values(ss, metric)) }

func spread(ss []sample) string {
	p50 := values(ss, "p50-ns")
	switch len(p50) {
	case 0:
		return "–"
	case 1:
		return "1 run"
	}
	return fmt.Sprintf("±%.0f%%", 100*(slices.Max(p50)-slices.Min(p50))/2/benchfmt.Median(p50))
}

// ratio formats a's p50 over base's, paired by round.
func ratio(a, base []sample, baseName string) string {
	r, lo, hi, ok := ratioOf(a, base, "p50-ns")
	if !ok {
		return ""
	}
	if lo == hi {
		return fmt.Sprintf("%s× %s", benchfmt.Ratio(r), baseName)
	}
	return fmt.Sprintf("%s× %s (%s–%s)", benchfmt.Ratio(r), baseName, benchfmt.Ratio(lo), benchfmt.Ratio(hi))
}

// ratioOf pairs a's and base's samples by round and returns the median,
// min and max of a/base for metric.
func ratioOf(a, base []sample, metric string) (med, lo, hi float64, ok bool) {
	var rs []float64
	for _, s := range a {
		for _, t := range base {
			x, ok1 := s.metrics[metric]
			y, ok2 := t.metrics[metric]
			if t.round == s.round && ok1 && ok2 && y != 0 {
				rs = append(rs, x/y)
			}
		}
	}
	if len(rs) == 0 {
		return 0, 0, 0, false
	}
	return benchfmt.Median(rs), slices.Min(rs), slices.Max(rs), true
}

// num formats a ratio with about three significant digits; below 0.1 as
// a fraction, 1/N, which reads better than 6.6e-05.
// sig formats x with three significant digits (x >= 0.001).
