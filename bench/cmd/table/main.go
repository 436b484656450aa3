// Command table turns the output of maiden's benchmarks (go test -bench)
// into the markdown table in bench/README.md. The input is several runs
// concatenated, each announced by a "# round N" line (bench/run writes
// them; benchstat ignores them); without such lines, the k-th result of each
// benchmark counts as run k, as with -count:
//
//	go test -run '^$' -bench . -count 5 ./bench > raw.txt
//	go run ./bench/cmd/table < raw.txt
//
// Every row is the median over runs of each run's p50, p99 and calls/s (the
// metrics bench_test.go reports). Spread is half the range of the runs' p50
// around the median. Ratios compare a row's p50 with its baseline's p50 from
// the same run (so drift between runs cancels out), median over runs.
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

// baselines names, for a variant (one segment of a benchmark name), the
// variants it is compared with: the same name with that segment replaced.
var baselines = map[string][]string{
	"maiden":             {"cgo-direct", "sandbox"},
	"maiden-workers":     {"maiden"},
	"sandbox":            {"cgo-direct"},
	"sandbox-pooling":    {"sandbox", "cgo-direct-pooling"},
	"cgo-direct-pooling": {"cgo-direct"},
	"cgo-warm":           {"cgo-direct"},
	"disk-cache":         {"compile"},
	"epoch":              {"no-epoch"},
}

// sample is one run's result for one benchmark.
type sample struct {
	round   int
	metrics map[string]float64
}

type bench struct {
	name    string
	samples []sample
}

func main() {
	benches, rounds, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "table:", err)
		os.Exit(1)
	}
	if len(benches) == 0 {
		fmt.Fprintln(os.Stderr, "table: no benchmark results in the input")
		os.Exit(1)
	}
	write(os.Stdout, benches, rounds)
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader) ([]*bench, int, error) {
	var order []*bench
	byName := map[string]*bench{}
	round, rounds, marked := 1, 0, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# round "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return nil, 0, fmt.Errorf("bad line %q", line)
			}
			round, marked = n, true
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line
		}
		name := procsSuffix.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		s := sample{round: round, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, 0, fmt.Errorf("bad value %q in %q", f[i], line)
			}
			s.metrics[f[i+1]] = v
		}
		b := byName[name]
		if b == nil {
			b = &bench{name: name}
			byName[name] = b
			order = append(order, b)
		}
		if !marked {
			s.round = len(b.samples) + 1
		}
		b.samples = append(b.samples, s)
		rounds = max(rounds, s.round)
	}
	return order, rounds, sc.Err()
}

func write(w io.Writer, benches []*bench, rounds int) {
	byName := map[string]*bench{}
	for _, b := range benches {
		byName[b.name] = b
	}
	fmt.Fprintf(w, "| benchmark | p50 | p99 | calls/s | spread (p50) | p50 vs baseline, same run | notes |\n")
	fmt.Fprintf(w, "|---|--:|--:|--:|--:|---|---|\n")
	for _, b := range benches {
		p50 := b.values("p50-ns")
		spread := "–"
		if len(p50) > 1 {
			spread = fmt.Sprintf("±%.0f%%", 100*(slices.Max(p50)-slices.Min(p50))/2/benchfmt.Median(p50))
		}
		if len(b.samples) < rounds {
			spread += fmt.Sprintf(" (%d run%s)", len(b.samples), benchfmt.Plural(len(b.samples)))
		}
		var ratios []string
		for _, base := range baselinesOf(b.name) {
			if bb := byName[base]; bb != nil {
				if r, lo, hi, ok := ratio(b, bb, "p50-ns"); ok {
					ratios = append(ratios, fmt.Sprintf("%s× %s (%s–%s)", benchfmt.Ratio(r), variantOf(base, b.name), benchfmt.Ratio(lo), benchfmt.Ratio(hi)))
				}
			}
		}
		var notes []string
		for _, m := range b.extraMetrics() {
			if name, ok := strings.CutSuffix(m, "-ratio"); ok { // a ratio measured within the benchmark
				notes = append(notes, fmt.Sprintf("%s %s×", name, benchfmt.Ratio(benchfmt.Median(b.values(m)))))
				continue
			}
			notes = append(notes, fmt.Sprintf("%s %s", strings.TrimSuffix(m, "-ns"), benchfmt.Duration(benchfmt.Median(b.values(m)))))
		}
		if g1 := strings.TrimSuffix(b.name, "/g2"); g1 != b.name {
			if bb := byName[g1+"/g1"]; bb != nil {
				if r, _, _, ok := ratio(b, bb, "calls/s"); ok {
					notes = append(notes, fmt.Sprintf("%s× the calls/s of g1", benchfmt.Ratio(r)))
				}
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", b.name,
			benchfmt.Duration(benchfmt.Median(p50)), benchfmt.Duration(benchfmt.Median(b.values("p99-ns"))), benchfmt.Rate(benchfmt.Median(b.values("calls/s"))),
			spread, strings.Join(ratios, "; "), strings.Join(notes, "; "))
	}
}

func (b *bench) values(metric string) []float64 {
	var v []float64
	for _, s := range b.samples {
		if x, ok := s.metrics[metric]; ok {
			v = append(v, x)
		}
	}
	return v
}

// extraMetrics are metrics other than the standard ones, in name order.
func (b *bench) extraMetrics() []string {
	seen := map[string]bool{}
	for _, s := range b.samples {
		for m := range s.metrics {
			switch m {
			case "ns/op", "p50-ns", "p99-ns", "calls/s", "B/op", "allocs/op":
			default:
				seen[m] = true
			}
		}
	}
	var ms []string
	for m := range seen {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	return ms
}

// ratio pairs a's and base's samples by run and returns the median, min and
// max of a/base for metric.
func ratio(a, base *bench, metric string) (med, lo, hi float64, ok bool) {
	var rs []float64
	for _, s := range a.samples {
		for _, t := range base.samples {
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

// baselinesOf returns the full names of name's baselines.
func baselinesOf(name string) []string {
	segs := strings.Split(name, "/")
	var out []string
	for i, s := range segs {
		for _, base := range baselines[s] {
			alt := slices.Clone(segs)
			alt[i] = base
			out = append(out, strings.Join(alt, "/"))
		}
	}
	return out
}

// variantOf is the segment in which base differs from name.
func variantOf(base, name string) string {
	bs, ns := strings.Split(base, "/"), strings.Split(name, "/")
	for i := range bs {
		if i < len(ns) && bs[i] != ns[i] {
			return bs[i]
		}
	}
	return base
}

// num formats a ratio with three significant digits.
// sig formats x with three significant digits (x >= 0.001).
