package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
)

// runChild is the test binary run as a child process (TestMain): mode
// "grants" opens the store named by MAIDEN_STORE_TEST_PATH and grants
// cards "tool:invoke t --n=I --w=WRITER" for I from MAIDEN_STORE_TEST_FROM
// up to MAIDEN_STORE_TEST_COUNT (forever if 0), printing I after each
// commit.
func runChild(mode string) int {
	if mode != "grants" {
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("MAIDEN_STORE_TEST_PATH"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	from, _ := strconv.Atoi(os.Getenv("MAIDEN_STORE_TEST_FROM"))
	count, _ := strconv.Atoi(os.Getenv("MAIDEN_STORE_TEST_COUNT"))
	writer := os.Getenv("MAIDEN_STORE_TEST_WRITER")
	for i := from; count == 0 || i < from+count; i++ {
		if _, err := s.Grant(ctx, "burst", labelled(i, writer)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(os.Stdout, i)
	}
	return 0
}
