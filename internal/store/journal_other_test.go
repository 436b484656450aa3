//go:build !linux

package store

func runFsizeChild() int { return 2 }
