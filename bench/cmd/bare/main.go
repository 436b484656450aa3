// Command bare is the floor of BenchmarkProcessStart: a Go program that
// does nothing, so what a start of maiden costs beyond it is maiden's
// (its size, its packages' initialisation).
package main

func main() {}
