//go:build race

package worker

// raceExtra is added to a worker's memory limit when maiden is built with
// the race detector (tests): its shadow memory grows with the Go heap and
// counts against RLIMIT_DATA.
const raceExtra = 1 << 30
