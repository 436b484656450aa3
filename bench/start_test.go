package bench

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkProcessStart starts a program and waits for it: bench/cmd/bare
// (a Go program that does nothing: the floor) and `maiden version`. A
// worker is the maiden executable started again, so a worker's start pays
// what maiden's start costs beyond the floor (the binary's pages, every
// package's initialisation) before its first call; so does every command.
// cpu-ms/op is the started process's user and system time.
//
//	go test -run '^$' -bench ProcessStart -benchtime 200x ./bench
func BenchmarkProcessStart(b *testing.B) {
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"bare", []string{testkit.Binary(b, "./bench/cmd/bare")}},
		{"maiden-version", []string{testkit.Binary(b, "./cmd/maiden"), "version"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				cmd := exec.Command(bc.args[0], bc.args[1:]...)
				if err := cmd.Run(); err != nil {
					b.Fatal(err)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
			b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
		})
	}
}
