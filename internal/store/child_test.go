package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
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
		// process starting beside others does. MAIDEN_STORE_TEST_BUSY,
		// if set, is the busy timeout (a Go duration).
		var opts *Options
		if b := os.Getenv("MAIDEN_STORE_TEST_BUSY"); b != "" {
			d, err := time.ParseDuration(b)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			opts = &Options{BusyTimeout: d}
		}
		s, err := Open(ctx, os.Getenv("MAIDEN_STORE_TEST_PATH"), opts)
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
	case "audit", "take", "consume", "approve-hold", "start-hold":
		return runChild2(mode)
	case "journal", "journal-hold":
		return runJournalChild(mode)
	case "journal-fsize":
		return runFsizeChild()
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

// runChild2 runs the children of the audit, limit and approval tests, on
// the store named by MAIDEN_STORE_TEST_PATH:
//   - audit: append MAIDEN_STORE_TEST_COUNT records of tool
//     MAIDEN_STORE_TEST_WRITER, numbered in their body, printing each
//     one's number once it is committed;
//   - take: take one token MAIDEN_STORE_TEST_COUNT times from bucket
//     (a, t, r) of capacity MAIDEN_STORE_TEST_FROM at a fixed time, and
//     print how many were allowed;
//   - consume: ConsumeAndStart approval MAIDEN_STORE_TEST_WRITER once, and
//     print "ok" or "no";
//   - approve-hold: approve it, print "approved", then wait to be killed;
//   - start-hold: ConsumeAndStart it, print "started", then wait to be
//     killed (the call "runs").
func runChild2(mode string) int {
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv("MAIDEN_STORE_TEST_PATH"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	count, _ := strconv.Atoi(os.Getenv("MAIDEN_STORE_TEST_COUNT"))
	from, _ := strconv.Atoi(os.Getenv("MAIDEN_STORE_TEST_FROM"))
	arg := os.Getenv("MAIDEN_STORE_TEST_WRITER")
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	switch mode {
	case "audit":
		for i := range count {
			if _, err := s.AppendAudit(ctx, AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: arg,
				Body: auditBody(map[string]int{"i": i})}); err != nil {
				return fail(err)
			}
			fmt.Println(i)
		}
	case "take":
		now := time.Unix(1_000_000, 0)
		n := 0
		for range count {
			ok, _, err := s.Take(ctx, BucketKey{"a", "t", "r"}, Rate{Capacity: int64(from), Refill: 1, Interval: time.Hour}, 1, now)
			if err != nil {
				return fail(err)
			}
			if ok {
				n++
			}
		}
		fmt.Println(n)
	case "consume":
		if _, err := s.ConsumeAndStart(ctx, arg, Binding{}); err != nil {
			if !errors.Is(err, ErrApprovalState) {
				return fail(err)
			}
			fmt.Println("no")
		} else {
			fmt.Println("ok")
		}
	case "approve-hold":
		if _, err := s.Decide(ctx, arg, true, "operator:ann", "fine"); err != nil {
			return fail(err)
		}
		fmt.Println("approved")
		time.Sleep(time.Hour)
	case "start-hold":
		if _, err := s.ConsumeAndStart(ctx, arg, Binding{}); err != nil {
			return fail(err)
		}
		fmt.Println("started")
		time.Sleep(time.Hour)
	}
	return 0
}

// runJournalChild appends MAIDEN_STORE_TEST_COUNT records (forever if 0)
// of tool MAIDEN_STORE_TEST_WRITER to the journal of the store named by
// MAIDEN_STORE_TEST_PATH, numbered in their body from 0, printing each
// number once Append acknowledged it. Mode journal then closes the store
// (which ingests); journal-hold opens it with an ingestion interval of an
// hour, prints "held" and waits to be killed with its records only in its
// journal file.
func runJournalChild(mode string) int {
	ctx := context.Background()
	opts := &Options{}
	if mode == "journal-hold" {
		opts.JournalInterval = time.Hour
	}
	s, err := Open(ctx, os.Getenv("MAIDEN_STORE_TEST_PATH"), opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	count, _ := strconv.Atoi(os.Getenv("MAIDEN_STORE_TEST_COUNT"))
	tool := os.Getenv("MAIDEN_STORE_TEST_WRITER")
	w := bufio.NewWriter(os.Stdout)
	for i := 0; count == 0 || i < count; i++ {
		if err := s.Journal().Append(AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: tool,
			Body: auditBody(map[string]int{"i": i})}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(w, i)
		if count == 0 || i%64 == 0 {
			w.Flush() // the parent reads acknowledgments as they come
		}
	}
	if mode == "journal-hold" {
		fmt.Fprintln(w, "held")
		w.Flush()
		time.Sleep(time.Hour)
	}
	w.Flush()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
