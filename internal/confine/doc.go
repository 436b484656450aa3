// Package confine runs an operator's executable (a wrapped CLI, a stdio MCP
// server) confined on Linux: no shell, an explicit argv, a scrubbed
// environment, Landlock over the filesystem (declared read-only and
// writable paths, plus the few system paths a dynamically linked program
// needs to start) and over TCP (connect only to one loopback proxy port, or
// nothing), a seccomp filter on socket creation, rlimits, no_new_privs, a
// process group killed at the deadline, and capped output.
//
// Go cannot run code between fork and exec, so Run starts the current
// binary again as a trampoline: [Main], called first thing by the program,
// recognises the trampoline's marker, reads the spec from an inherited pipe,
// confines its own (locked) thread and execve's the target from it. A
// program using Run must call Main at the top of main (and tests in
// TestMain).
//
// [Probe] proves at start that the confinement is in force: a confined child
// tries a forbidden read, write, connect and UDP socket, and the allowed
// counterparts of each, and Probe names everything that was not enforced.
// See docs/confinement.md.
package confine
