package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
)

// runChild is the test binary run as a child process (TestMain): mode
// "open" opens the store and adds agent burst; mode "grants" opens the store named by MAIDEN_STORE_TEST_PATH and grants
// cards "tool:invoke t --n=I --w=WRITER" for I from MAIDEN_STORE_TEST_FROM
// up to MAIDEN_STORE_TEST_COUNT (forever if 0), printing I after each
// commit.
func runChild(mode string) int {
	ctx := context.Background()
	switch mode {
	case "open":
		// Open (migrating a new file) and add an agent, as a maiden
		// process starting beside others does.
		s, err := Open(ctx, os.Getenv("MAIDEN_STORE_TEST_PATH"), nil)
		if err == nil {
			err = s.EnsureAgent(ctx, "burst")
			s.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "grants":
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", mode)
		return 2
	}
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
