// Package multiinstance is test-only: its tests run several real `maiden
// serve -http` processes (the binary built from this checkout) on one
// PostgreSQL state store (internal/pgtest's throwaway cluster) and drive
// them with the official TypeScript MCP client (testdata/driver.mjs): a
// revocation on one instance reaches the others' next call, an approval given
// anywhere releases the call waiting on another exactly once, a rate limit
// holds across all of them, the audit trail stays one verifiable chain, and
// the faults (the database restarted under load, an instance killed with -9
// while it runs an approved call) lose and duplicate nothing. Its benchmark
// compares calls per second through 1, 2 and 3 instances on PostgreSQL with
// one instance on SQLite, and measures how long a revocation takes to reach
// the other instances.
package multiinstance
