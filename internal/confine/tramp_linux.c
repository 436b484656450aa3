// The trampoline of confine.StartCmd (long-running processes started as an
// *exec.Cmd, e.g. stdio MCP upstreams), run by a constructor before the Go runtime
// (and any Go package's init) starts: only in a process whose environment
// holds MAIDEN_CONFINE_TRAMPOLINE. The parent prepared everything that
// needs judgement; this code only applies it, in this order:
//   - reads the limits and the seccomp program from fd 4 (a pipe, closed
//     after reading);
//   - marks fd 5 (the status pipe) close-on-exec, and after reading the
//     config every descriptor above 2 (what maiden held without
//     close-on-exec does not reach the program);
//   - joins the network namespace on fd 6 (setns), when the marker's second
//     letter is "S" (a process with network: netns_linux.go), or first the
//     user namespace on fd 7 and then that one, when it is "U"; closes them;
//   - sets the rlimits (soft = hard);
//   - no_new_privs;
//   - landlock_restrict_self with the ruleset on fd 3 (built by the
//     parent), when the marker's value is "L", then closes it;
//   - installs the seccomp filter;
//   - removes the marker from the environment and executes argv[1] with
//     argv[1..] and that environment.
// Any failure is written to fd 5 and the process exits 127 without
// executing anything. It never returns into Go.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

#define MARKER "MAIDEN_CONFINE_TRAMPOLINE="
#define RULESET_FD 3
#define CONFIG_FD 4
#define STATUS_FD 5
#define NETNS_FD 6
#define USERNS_FD 7
#ifndef CLONE_NEWNET
#define CLONE_NEWNET 0x40000000
#endif
#ifndef CLONE_NEWUSER
#define CLONE_NEWUSER 0x10000000
#endif
#ifndef __NR_close_range
#define __NR_close_range 436
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#define NLIMITS 5
#define MAX_INSNS 256

static void fail(const char *what, int err) {
	char buf[256];
	int n = snprintf(buf, sizeof buf, "%s: %s", what, strerror(err));
	if (n > 0) {
		ssize_t w = write(STATUS_FD, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
		(void)w;
	}
	_exit(127);
}

static int read_full(int fd, void *p, size_t n) {
	char *c = p;
	while (n > 0) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			return -1;
		}
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

// The config, all little-endian as written by the parent on this machine:
// NLIMITS uint64 (core, data, nproc, fsize, nofile), a uint64 count of
// filter instructions, then the instructions.
static const int resources[NLIMITS] = {RLIMIT_CORE, RLIMIT_DATA, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_NOFILE};

__attribute__((constructor)) static void maiden_confine_trampoline(int argc, char **argv, char **envp) {
	const char *m = getenv("MAIDEN_CONFINE_TRAMPOLINE");
	if (m == NULL) {
		return;
	}
	if (fcntl(STATUS_FD, F_SETFD, FD_CLOEXEC) != 0) {
		_exit(127);
	}
	if (argc < 3) {
		fail("trampoline: no program", EINVAL);
	}
	uint64_t limits[NLIMITS], count;
	static struct sock_filter insns[MAX_INSNS];
	if (read_full(CONFIG_FD, limits, sizeof limits) != 0 || read_full(CONFIG_FD, &count, sizeof count) != 0 ||
	    count == 0 || count > MAX_INSNS || read_full(CONFIG_FD, insns, count * sizeof insns[0]) != 0) {
		fail("trampoline: reading the config", EIO);
	}
	close(CONFIG_FD);
	// Whatever else maiden held without close-on-exec (descriptors C
	// libraries opened: os/exec passes them on) does not reach the
	// program, as in Run's child (spawn_linux.c).
	if (syscall(__NR_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
		for (int fd = 3; fd < 4096; fd++) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
		}
	}
	if (m[0] != '\0' && m[1] == 'U') {
		if (syscall(__NR_setns, USERNS_FD, CLONE_NEWUSER) != 0) {
			fail("setns user", errno);
		}
		close(USERNS_FD);
	}
	if (m[0] != '\0' && (m[1] == 'S' || m[1] == 'U')) {
		if (syscall(__NR_setns, NETNS_FD, CLONE_NEWNET) != 0) {
			fail("setns", errno);
		}
		close(NETNS_FD);
	}
	for (int i = 0; i < NLIMITS; i++) {
		struct rlimit rl = {limits[i], limits[i]};
		if (setrlimit(resources[i], &rl) != 0) {
			fail("setrlimit", errno);
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		fail("no_new_privs", errno);
	}
	if (m[0] == 'L') {
		if (syscall(__NR_landlock_restrict_self, RULESET_FD, 0) != 0) {
			fail("landlock_restrict_self", errno);
		}
		close(RULESET_FD);
	}
	struct sock_fprog prog = {.len = (unsigned short)count, .filter = insns};
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		fail("seccomp", errno);
	}
	// The environment without the marker (the parent put it last).
	int w = 0;
	for (int r = 0; envp[r] != NULL; r++) {
		if (strncmp(envp[r], MARKER, sizeof MARKER - 1) != 0) {
			envp[w++] = envp[r];
		}
	}
	envp[w] = NULL;
	execve(argv[1], argv + 2, envp);
	fail(argv[1], errno);
}
