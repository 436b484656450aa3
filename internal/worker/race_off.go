//go:build !race

package worker

// raceExtra is added to a worker's memory limit when maiden is built with
// the race detector; none otherwise.
const raceExtra = 0
