// Package confine runs an operator's executable (a wrapped CLI, a stdio MCP
// server) confined on Linux: no shell, an explicit argv, a scrubbed
// environment, Landlock over the filesystem (declared read-only and
// writable paths, plus the few system paths a dynamically linked program
// needs to start) and over TCP (connect only to one loopback proxy port, or
// nothing), a seccomp filter on socket creation, TCP Fast Open sends and
// listen (whose implicit connect and bind Landlock does not see), io_uring
// and leaving the process group, rlimits, no_new_privs, a process group
// killed at the deadline, and capped output. A run with network gets a
// network namespace of its own in which only the proxy exists (as root
// directly, otherwise inside a user namespace: netns_linux.go).
//
// Go has no hook between fork and exec, so the start is C (spawn_linux.c):
// vfork, then only system calls in the child (the same discipline as Go's
// own os/exec) that apply what the parent prepared (the Landlock ruleset,
// the seccomp program, the limits) before execve. No second copy of the
// calling program is started, so a confined start costs about what a bare
// os/exec does.
//
// [Probe] proves at start that the confinement is in force: a confined child
// tries a forbidden read, write, connect, Fast Open send, listen, UDP and
// raw send, unix socket, io_uring and leaving the process group, and the
// allowed counterparts of the first three, and Probe names everything that
// was not enforced. The probe's child is the
// calling program itself, so a program that calls Probe must call [Main]
// first thing in main (tests: in TestMain). See docs/confinement.md.
package confine
