// confine.Run's process start: vfork, then in the child only system calls
// (no allocation, no locks, nothing of the Go runtime) that confine it
// before execve. This is what Go's own os/exec does between fork and exec,
// plus the confinement Go has no hook for. The parent prepared everything
// that needs judgement: the Landlock ruleset (an fd), the seccomp program,
// the limits; the child only applies them, in this order:
//   signal handlers reset and fds moved out of the way; a new process group;
//   the parent-death signal (and maiden still its parent); the user namespace and the network namespace
//   (setns, for a run with network: netns_linux.go); the working directory; stdin, stdout, stderr;
//   every other descriptor close-on-exec; rlimits (soft = hard);
//   no_new_privs; landlock_restrict_self; the seccomp filter; the signal
//   mask cleared; execve.
// A failure is written to the status pipe (close-on-exec: EOF means the
// program was executed) as "step: error", and the child exits 127.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawn_linux.h"

#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif
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

static const int resources[MAIDEN_NLIMITS] = {RLIMIT_CORE, RLIMIT_DATA, RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_NOFILE};

// Only async-signal-safe calls below, and no writes to memory but the stack.
static void child_fail(int status_fd, const char *step) __attribute__((noreturn));
static void child_fail(int status_fd, const char *step) {
	int err = errno;
	char buf[96];
	size_t n = 0;
	for (const char *p = step; *p && n < 60; p++) {
		buf[n++] = *p;
	}
	buf[n++] = ':';
	buf[n++] = ' ';
	// errno as a decimal number; Go renders it.
	char digits[12];
	int d = 0;
	do {
		digits[d++] = (char)('0' + err % 10);
		err /= 10;
	} while (err > 0 && d < 11);
	while (d > 0) {
		buf[n++] = digits[--d];
	}
	ssize_t w = write(status_fd, buf, n);
	(void)w;
	_exit(127);
}

static void child(const struct maiden_spawn *a, const sigset_t *empty) __attribute__((noreturn, noinline));
static void child(const struct maiden_spawn *a, const sigset_t *empty) {
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++) {
		sigaction(sig, &dfl, NULL); // EINVAL for KILL, STOP and libc's own
	}
	// Move every descriptor we need above 2 first, so dup2 cannot clobber one.
	int status = fcntl(a->status_fd, F_DUPFD_CLOEXEC, 10);
	if (status < 0) {
		_exit(127);
	}
	int in = fcntl(a->stdin_fd, F_DUPFD_CLOEXEC, 10);
	int out = fcntl(a->stdout_fd, F_DUPFD_CLOEXEC, 10);
	int err = fcntl(a->stderr_fd, F_DUPFD_CLOEXEC, 10);
	int ruleset = a->ruleset_fd >= 0 ? fcntl(a->ruleset_fd, F_DUPFD_CLOEXEC, 10) : -1;
	int netns = a->netns_fd >= 0 ? fcntl(a->netns_fd, F_DUPFD_CLOEXEC, 10) : -1;
	int userns = a->userns_fd >= 0 ? fcntl(a->userns_fd, F_DUPFD_CLOEXEC, 10) : -1;
	if (in < 0 || out < 0 || err < 0 || (a->ruleset_fd >= 0 && ruleset < 0) || (a->netns_fd >= 0 && netns < 0) ||
	    (a->userns_fd >= 0 && userns < 0)) {
		child_fail(status, "descriptors");
	}
	if (setpgid(0, 0) != 0) {
		child_fail(status, "setpgid");
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
		child_fail(status, "pdeathsig");
	}
	// vfork stops only the thread that called it: maiden may have died
	// since (killed), before the signal was set, and the signal is not
	// sent for a death that came first. Then the program must not run,
	// with no one left to bound or kill it.
	if (getppid() != a->parent_pid) {
		errno = ESRCH;
		child_fail(status, "parent gone");
	}
	// The same user, in a user namespace that maps only it: what it may do
	// outside is unchanged, and execve drops the capabilities it has inside.
	if (userns >= 0 && syscall(__NR_setns, userns, CLONE_NEWUSER) != 0) {
		child_fail(status, "setns user");
	}
	if (netns >= 0 && syscall(__NR_setns, netns, CLONE_NEWNET) != 0) {
		child_fail(status, "setns");
	}
	if (a->dir != NULL && chdir(a->dir) != 0) {
		child_fail(status, "chdir");
	}
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) {
		child_fail(status, "dup2");
	}
	// Whatever else this process holds (descriptors C libraries opened
	// without O_CLOEXEC included) does not reach the program.
	if (syscall(__NR_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
		for (int fd = 3; fd < 4096; fd++) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
		}
	}
	for (int i = 0; i < MAIDEN_NLIMITS; i++) {
		struct rlimit rl = {a->limits[i], a->limits[i]};
		if (setrlimit(resources[i], &rl) != 0) {
			child_fail(status, "setrlimit");
		}
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		child_fail(status, "no_new_privs");
	}
	if (ruleset >= 0 && syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) {
		child_fail(status, "landlock_restrict_self");
	}
	struct sock_fprog prog = {.len = (unsigned short)a->filter_len, .filter = (struct sock_filter *)a->filter};
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		child_fail(status, "seccomp");
	}
	sigprocmask(SIG_SETMASK, empty, NULL);
	execve(a->path, a->argv, a->envp);
	child_fail(status, "execve");
}

int maiden_spawn(const struct maiden_spawn *a) {
	sigset_t all, old, empty;
	sigfillset(&all);
	sigemptyset(&empty);
	// No signal handler may run in the child while it shares our memory.
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = vfork();
	if (pid == 0) {
		child(a, &empty);
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return pid < 0 ? -e : pid;
}
