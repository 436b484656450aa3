// Confinement of a worker process, applied by a constructor before the Go
// runtime starts (so before any thread exists: Landlock and seccomp
// filters are inherited by every thread created afterwards, and cgo
// programs cannot apply them to existing threads: Go's AllThreadsSyscall is
// unavailable with cgo).
//
// It runs only in a process whose environment has MAIDEN_WORKER set. What
// it does, in order:
//   - rlimits: no core dumps, no file writes, few descriptors;
//   - no_new_privs;
//   - Landlock, best effort for the kernel's ABI: every filesystem access
//     right handled and none granted (the worker opens no file), TCP bind
//     and connect denied (ABI 4+), abstract unix sockets and signals to
//     processes outside the domain denied (ABI 6+);
//   - except in a worker started for one call with WASI preopened
//     directories (MAIDEN_WORKER_PREOPENS, one 'r' or 'w' per directory,
//     each an O_PATH descriptor the parent opened, from fd 4): Landlock
//     grants reading beneath each, and writing beneath the 'w' ones
//     (files and directories: no symlinks, devices, fifos or sockets), a
//     file written is capped at 1 GiB (RLIMIT_FSIZE), and seccomp lets
//     openat through, since Landlock now decides what opens. Such a worker
//     refuses to start without Landlock;
//   - a seccomp filter denying, with EPERM, every system call that makes a
//     new socket or process, runs a program, inspects other processes,
//     changes namespaces or mounts, or raises a resource limit.
// The result is recorded for Go to read (maiden_confine_error): a worker that
// could not be confined refuses to run guest code.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static char confine_error[256];
static char confine_note[256];

const char *maiden_confine_error(void) { return confine_error; }
const char *maiden_confine_note(void) { return confine_note; }

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#define LL_RULE_PATH_BENEATH 1

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

// The preopened directories of a one-call worker: their access ('r' or
// 'w'), from fd PREOPEN_FD0 on. The parent checks the count; so does this.
#define PREOPEN_FD0 4
#define MAX_PREOPENS 32
static const char *preopens = "";

// Landlock filesystem rights (linux/landlock.h).
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_REFER (1ULL << 13)    // ABI 2
#define LL_FS_TRUNCATE (1ULL << 14) // ABI 3

static int add_preopen_rules(int ruleset, long abi) {
	for (size_t i = 0; preopens[i] != 0; i++) {
		struct ll_path_beneath_attr rule = {.parent_fd = PREOPEN_FD0 + (int)i};
		rule.allowed_access = LL_FS_READ_FILE | LL_FS_READ_DIR;
		if (preopens[i] == 'w') {
			rule.allowed_access |= LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_DIR | LL_FS_MAKE_REG;
			if (abi >= 2) {
				rule.allowed_access |= LL_FS_REFER;
			}
			if (abi >= 3) {
				rule.allowed_access |= LL_FS_TRUNCATE;
			}
		}
		if (syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) != 0) {
			snprintf(confine_error, sizeof confine_error, "landlock_add_rule for preopened directory %zu (fd %d): errno %d", i, rule.parent_fd, errno);
			return -1;
		}
	}
	return 0;
}

static void landlock(void) {
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1) {
		snprintf(confine_note, sizeof confine_note, "landlock unavailable (errno %d)", errno);
		if (preopens[0] != 0) {
			// Without Landlock nothing would keep the tool's worker from
			// opening any file once openat is allowed.
			snprintf(confine_error, sizeof confine_error, "preopened directories need Landlock, which this kernel does not offer (errno %d)", errno);
		}
		return;
	}
	struct ll_ruleset_attr attr = {0};
	size_t size = sizeof(uint64_t);
	int fsbits = abi >= 5 ? 16 : abi >= 3 ? 15 : abi >= 2 ? 14 : 13;
	attr.handled_access_fs = (1ULL << fsbits) - 1;
	if (abi >= 4) {
		attr.handled_access_net = 3; // bind and connect TCP
		size = 2 * sizeof(uint64_t);
	}
	if (abi >= 6) {
		attr.scoped = 3; // abstract unix sockets, signals
		size = sizeof attr;
	}
	int fd = syscall(__NR_landlock_create_ruleset, &attr, size, 0);
	if (fd < 0) {
		snprintf(confine_error, sizeof confine_error, "landlock_create_ruleset (ABI %ld): errno %d", abi, errno);
		return;
	}
	if (add_preopen_rules(fd, abi) != 0) {
		close(fd);
		return;
	}
	if (syscall(__NR_landlock_restrict_self, fd, 0) != 0) {
		snprintf(confine_error, sizeof confine_error, "landlock_restrict_self: errno %d", errno);
	}
	close(fd);
	snprintf(confine_note, sizeof confine_note, "landlock ABI %ld", abi);
}

#if defined(__x86_64__)
#define MAIDEN_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define MAIDEN_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef MAIDEN_AUDIT_ARCH
static const int denied[] = {
	__NR_socket, __NR_socketpair, __NR_connect, __NR_bind, __NR_listen, __NR_accept, __NR_accept4,
	__NR_execve, __NR_execveat,
#ifdef __NR_fork
	__NR_fork,
#endif
#ifdef __NR_vfork
	__NR_vfork,
#endif
	__NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev, __NR_kexec_load,
	__NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot, __NR_setns, __NR_unshare,
	__NR_bpf, __NR_perf_event_open, __NR_keyctl, __NR_add_key, __NR_request_key, __NR_userfaultfd,
	__NR_init_module, __NR_finit_module, __NR_delete_module, __NR_open_by_handle_at,
	__NR_name_to_handle_at, __NR_swapon, __NR_swapoff, __NR_reboot, __NR_acct,
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register, __NR_setrlimit,
#ifdef __NR_pidfd_open
	__NR_pidfd_open, __NR_pidfd_getfd, __NR_pidfd_send_signal,
#endif
	// Memory that RLIMIT_DATA does not count, or that outlives the worker.
	__NR_shmget, __NR_shmat, __NR_shmctl, __NR_msgget, __NR_msgsnd, __NR_msgrcv, __NR_msgctl,
	__NR_semget, __NR_semop, __NR_semtimedop, __NR_semctl, __NR_mq_open, __NR_memfd_create,
	// Files: a worker opens none (Landlock denies them too, where the
	// kernel has it; this holds where it does not).
	__NR_openat, __NR_openat2,
#ifdef __NR_open
	__NR_open,
#endif
#ifdef __NR_creat
	__NR_creat,
#endif
	// Signals to threads by bare id: the runtimes use tgkill.
	__NR_tkill,
};

#define MAX_INSNS 400

static void seccomp_filter(void) {
	const pid_t self = getpid();
	struct sock_filter f[MAX_INSNS];
	int n = 0;
#define I(code, k) (f[n++] = (struct sock_filter)BPF_STMT(code, k))
#define J(code, k, jt, jf) (f[n++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf))
	const uint32_t deny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	J(BPF_JMP | BPF_JEQ | BPF_K, MAIDEN_AUDIT_ARCH, 1, 0);
	I(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
	// x32 system calls are another numbering of the same calls.
	J(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
	I(BPF_RET | BPF_K, deny);
#endif
	for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
		if (preopens[0] != 0 && (denied[i] == __NR_openat || denied[i] == __NR_openat2)) {
			continue; // Landlock holds the files of a worker with preopens
		}
		J(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)denied[i], 0, 1);
		I(BPF_RET | BPF_K, deny);
	}
	// clone3 passes its flags in memory a filter cannot read: make libc fall
	// back to clone, whose flags it can.
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1);
	I(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
	// clone: threads only (CLONE_THREAD), never a new process.
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
	J(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 1, 0);
	I(BPF_RET | BPF_K, deny);
	I(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	// Signals only to itself (Go preempts its threads with tgkill(getpid()),
	// abort() raises SIGABRT the same way): never to the parent or any
	// other process, whatever Landlock's scoping offers.
	const int signalling[] = {__NR_kill, __NR_tgkill, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo};
	for (size_t i = 0; i < sizeof signalling / sizeof signalling[0]; i++) {
		J(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)signalling[i], 0, 4);
		I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
		J(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)self, 1, 0);
		I(BPF_RET | BPF_K, deny);
		I(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	}
	// mmap: never shared (shared anonymous memory is not counted by
	// RLIMIT_DATA), never growing down.
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 4);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3]));
	J(BPF_JMP | BPF_JSET | BPF_K, MAP_SHARED | MAP_GROWSDOWN, 0, 1);
	I(BPF_RET | BPF_K, deny);
	I(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	// prlimit64 may read limits (new_limit == NULL), never set them: the
	// parent sets the worker's memory limit, and the worker must not raise it.
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_prlimit64, 0, 6);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]));
	J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]) + 4);
	J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1);
	I(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	I(BPF_RET | BPF_K, deny);
	I(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
#undef I
#undef J
	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	if (syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		snprintf(confine_error, sizeof confine_error, "seccomp: errno %d", errno);
	}
}
#else
static void seccomp_filter(void) {
	snprintf(confine_error, sizeof confine_error, "seccomp filter not written for this architecture");
}
#endif

static void set_limit(int resource, rlim_t v) {
	struct rlimit rl = {v, v};
	if (setrlimit(resource, &rl) != 0 && confine_error[0] == 0) {
		snprintf(confine_error, sizeof confine_error, "setrlimit(%d): errno %d", resource, errno);
	}
}

__attribute__((constructor)) static void maiden_confine(void) {
	const char *w = getenv("MAIDEN_WORKER");
	if (w == NULL || w[0] == 0) {
		return;
	}
	const char *p = getenv("MAIDEN_WORKER_PREOPENS");
	if (p != NULL) {
		size_t n = strlen(p);
		if (n > MAX_PREOPENS || strspn(p, "rw") != n) {
			snprintf(confine_error, sizeof confine_error, "MAIDEN_WORKER_PREOPENS: want at most %d of r and w", MAX_PREOPENS);
			return;
		}
		preopens = p;
	}
	set_limit(RLIMIT_CORE, 0);
	set_limit(RLIMIT_FSIZE, strchr(preopens, 'w') != NULL ? (rlim_t)1 << 30 : 0);
	set_limit(RLIMIT_NOFILE, 256);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(confine_error, sizeof confine_error, "no_new_privs: errno %d", errno);
		return;
	}
	if (confine_error[0] == 0) {
		landlock();
	}
	if (confine_error[0] == 0) {
		seccomp_filter();
	}
}
