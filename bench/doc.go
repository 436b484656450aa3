// Package bench holds maiden's benchmarks of the sandbox core: per-call
// latency and throughput through maiden and through the bare cgo layer, with
// and without wasmtime's pooling allocator, load (compile vs disk cache), and
// the cost of epoch interruption on a CPU-bound tool. The package has no code
// of its own; the benchmarks are in bench_test.go and ./run prints the
// README's table from them:
//
//	make bench                  # or ./bench/run; BENCH_QUICK=1 for a short run
//	go test -run '^$' -bench 'Call/wat' ./bench
//
// See README.md in this directory for what each row means.
package bench
