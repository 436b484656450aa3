// Command whatiftrail writes internal/whatif's varied trail of recorded
// calls into a new SQLite state store through the store's own API
// (trailstore.Store: agents, cards granted and revoked, the records through
// the audit journal), for bench/whatif-e2e, which times maiden audit
// whatif on it. It prints the ID of the live card that decided the most
// records (a change to revoke) on stdout.
//
//	go run ./bench/cmd/whatiftrail -state /tmp/x/maiden-state.db -records 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/maiden-run/maiden/internal/whatif/whatiftest/trailstore"
)

func main() {
	path := flag.String("state", "", "the SQLite state store to create (must not exist)")
	n := flag.Int("records", 100_000, "how many records to append")
	nCards := flag.Int("cards", 40, "how many random cards to grant")
	seed := flag.Uint64("seed", 24, "the generator's seed")
	flag.Parse()
	if *path == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: whatiftrail -state FILE [-records N] [-cards N] [-seed N]")
		os.Exit(2)
	}
	if _, err := os.Stat(*path); err == nil {
		fmt.Fprintf(os.Stderr, "whatiftrail: %s exists: it writes a new store only\n", *path)
		os.Exit(2)
	}
	info, err := trailstore.Store(context.Background(), *path, *seed, *nCards, *n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "whatiftrail: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "whatiftrail: %d records, %d cards (%d revoked, %d derived) in %s\n", info.Records, info.Cards, info.Revoked, info.Derived, *path)
	fmt.Println(info.Live)
}
