// Confinement of a worker process, applied by a constructor before the Go
// runtime starts (so before any thread exists: Landlock and seccomp
// filters are inherited by every thread created afterwards, and cgo
// programs cannot apply them to existing threads: Go's AllThreadsSyscall is
// unavailable with cgo).
//
// It runs only in a process whose environment has MAIDEN_WORKER set. What
// it does, in order:
//   - rlimits: no core dumps, no file writes, few descriptors;
//   - started by root: a uid and gid of its own, WORKER_UID_BASE + pid,
//     with RLIMIT_NPROC bounding its threads, no capability (every set
//     empty, securebits locked), and the parent-death signal set again (a
//     uid change clears it); a worker with preopens keeps maiden's
//     filesystem ids (drop_ids);
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
//     file written is capped at 1 GiB (RLIMIT_FSIZE), seccomp lets openat
//     and the *at calls through, since Landlock now decides what opens,
//     and the worker accesses files with maiden's filesystem ids (and no
//     capability: drop_ids).
//     Such a worker refuses to start without Landlock;
//   - a seccomp allowlist: the calls the Go runtime, glibc and wasmtime
//     make once confined, some only with safe arguments (recvmsg only on
//     the code channel named by MAIDEN_WORKER_CODE, where compiled code
//     arrives as sealed memfds: codefd.go); EPERM for the
//     calls an escaped worker would reach for, ENOSYS for any other.
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
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static char confine_error[256];
static char confine_note[256];
static char confine_ids[128];

const char *maiden_confine_error(void) { return confine_error; }
const char *maiden_confine_note(void) { return confine_note; }
const char *maiden_confine_ids(void) { return confine_ids; }

// The shared mailboxes (mailbox.go): the region the parent made, mapped here
// because the seccomp filter refuses shared mappings, and its descriptor
// closed, so the worker can neither map it again nor resize it (the parent
// sealed its size too). Without it the worker speaks over its socket alone.
static void *mailbox;
static size_t mailbox_size;

void *maiden_mailbox(void) { return mailbox; }
size_t maiden_mailbox_size(void) { return mailbox_size; }

// env_fd is the descriptor the environment variable name holds, from 3 to
// 255; -1 if it is unset or anything else.
static int env_fd(const char *name) {
	const char *v = getenv(name);
	if (v == NULL || v[0] == 0) {
		return -1;
	}
	char *end;
	long fd = strtol(v, &end, 10);
	if (*end != 0 || fd < 3 || fd > 255) {
		return -1;
	}
	return (int)fd;
}

// The worker's end of its code channel (codefd.go), the one descriptor
// recvmsg may read: the parent sends compiled code there as sealed memfds.
// -1 without one (recvmsg is then refused on every descriptor).
static int code_fd = -1;

static void map_mailbox(void) {
	const int fd = env_fd("MAIDEN_WORKER_MAILBOX");
	if (fd < 0) {
		return;
	}
	struct stat st;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size <= (1 << 20)) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			mailbox = p;
			mailbox_size = (size_t)st.st_size;
		}
	}
	close(fd);
}

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
// Numbers newer than some system headers.
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#define __NR_removexattrat 466
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef __NR_memfd_secret
#define __NR_memfd_secret 447
#endif
#ifndef __NR_process_mrelease
#define __NR_process_mrelease 448
#endif
#ifndef __NR_epoll_pwait2
#define __NR_epoll_pwait2 441
#endif
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

// The filter is an allowlist. What a worker calls once confined (measured
// with strace over the worker tests: the Go runtime, glibc, wasmtime's
// runtime and compiler, WASI filesystem calls on preopened directories):
// each call below is there for a named user, and anything else fails. The
// calls a worker that escaped the engine would reach for are also listed
// by name (denied[]), so that the errno they get is EPERM, a refusal, and a
// test can tell a refusal by this filter from one by the kernel or
// Landlock.
//
// The default for a call in neither list is ENOSYS rather than EPERM:
// ENOSYS is what a kernel too old for the call answers, and every runtime
// in the worker treats it as "use the older call" (glibc's clone3 and
// statx fallbacks, Go's epoll_pwait2 and futex probes, Rust's copy and
// random fallbacks), so a newer glibc, Go or wasmtime that tries a call
// this list does not know yet keeps working through its fallback, which
// this list does know; EPERM would read as a real refusal and fail the
// worker instead.

// Allowed without looking at the arguments, most frequent first (the
// filter is a linear scan).
static const int allowed[] = {
	// The Go runtime's scheduler and glibc's locks, sleeps and clocks.
	__NR_futex, __NR_read, __NR_write, __NR_epoll_pwait, __NR_nanosleep, __NR_sched_yield,
	__NR_clock_gettime, __NR_clock_nanosleep, __NR_clock_getres, __NR_gettimeofday,
	__NR_getpid, __NR_gettid, __NR_getppid, __NR_getrandom, __NR_epoll_pwait2,
#ifdef __NR_epoll_wait
	__NR_epoll_wait,
#endif
	// Signals: Go's preemption and crash handling, wasmtime's trap
	// handlers (SIGSEGV/SIGILL/SIGBUS on their alternate stacks).
	__NR_rt_sigaction, __NR_rt_sigprocmask, __NR_rt_sigreturn, __NR_sigaltstack,
	// Memory: Go's heap, glibc's malloc, wasmtime's code and linear
	// memories (reserve, protect, grow, release; mincore to keep freed
	// pages of spare reservations resident). mmap and madvise are checked
	// below.
	__NR_mprotect, __NR_munmap, __NR_brk, __NR_mremap, __NR_mincore,
	// The descriptors it holds (the IPC socket, Go's poller, preopened
	// directories' files): reading, writing, polling, closing.
	__NR_close, __NR_readv, __NR_writev, __NR_pread64, __NR_pwrite64, __NR_preadv, __NR_pwritev,
	__NR_preadv2, __NR_pwritev2, __NR_lseek, __NR_dup, __NR_dup3, __NR_fstat, __NR_newfstatat,
	__NR_statx, __NR_getdents64, __NR_epoll_create1, __NR_epoll_ctl, __NR_eventfd2, __NR_ppoll,
#ifdef __NR_poll
	__NR_poll,
#endif
#ifdef __NR_dup2
	__NR_dup2,
#endif
	// Thread start and end (glibc's pthreads, Go's Ms), and what the
	// runtimes read about the machine at start.
	__NR_set_robust_list, __NR_rseq, __NR_set_tid_address, __NR_sched_getaffinity,
	__NR_restart_syscall, __NR_exit, __NR_exit_group, __NR_uname, __NR_membarrier,
	__NR_getuid, __NR_geteuid, __NR_getgid, __NR_getegid,
#ifdef __NR_getrlimit
	__NR_getrlimit,
#endif
#ifdef __NR_arch_prctl
	__NR_arch_prctl, // thread pointer (FS) of new threads
#endif
};

// Allowed only in a worker with preopened directories: WASI's filesystem
// calls (cap-std's openat2 with RESOLVE_BENEATH, and the *at calls that
// create, rename and remove), which Landlock confines to the directories.
// utimensat is not here: Landlock has no right for it.
static const int allowed_preopens[] = {
	__NR_openat, __NR_openat2, __NR_mkdirat, __NR_unlinkat, __NR_renameat2, __NR_linkat,
	__NR_symlinkat, __NR_readlinkat, __NR_faccessat, __NR_faccessat2, __NR_ftruncate,
	__NR_fsync, __NR_fdatasync,
#ifdef __NR_renameat
	__NR_renameat,
#endif
#ifdef __NR_fadvise64
	__NR_fadvise64,
#endif
};

// Denied by name (EPERM): what a worker that escaped the engine would
// reach for. Most are not in allowed[] either, so listing them only sets
// the errno; the checked calls below refuse their dangerous forms with
// the same EPERM.
static const int denied[] = {
	// New sockets, processes and programs.
	__NR_socket, __NR_socketpair, __NR_connect, __NR_bind, __NR_listen, __NR_accept, __NR_accept4,
	__NR_execve, __NR_execveat,
#ifdef __NR_fork
	__NR_fork,
#endif
#ifdef __NR_vfork
	__NR_vfork,
#endif
	// Other processes: tracing, their memory, scheduling, handles.
	__NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev, __NR_process_madvise,
	__NR_process_mrelease, __NR_kcmp, __NR_pidfd_open, __NR_pidfd_getfd, __NR_pidfd_send_signal,
	__NR_setpriority, __NR_sched_setscheduler, __NR_sched_setparam, __NR_sched_setattr,
	__NR_sched_setaffinity, __NR_ioprio_set, __NR_migrate_pages, __NR_move_pages,
	// Namespaces, mounts, the kernel.
	__NR_unshare, __NR_setns, __NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot,
	__NR_fsopen, __NR_fsconfig, __NR_fsmount, __NR_fspick, __NR_open_tree, __NR_open_tree_attr,
	__NR_move_mount, __NR_mount_setattr, __NR_syslog, __NR_bpf, __NR_perf_event_open,
	__NR_keyctl, __NR_add_key, __NR_request_key, __NR_userfaultfd, __NR_kexec_load,
	__NR_kexec_file_load, __NR_init_module, __NR_finit_module, __NR_delete_module,
	__NR_open_by_handle_at, __NR_name_to_handle_at, __NR_swapon, __NR_swapoff, __NR_reboot,
	__NR_acct, __NR_quotactl, __NR_settimeofday, __NR_clock_settime, __NR_clock_adjtime,
	__NR_adjtimex, __NR_sethostname, __NR_setdomainname, __NR_personality,
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
	// Identity and limits: never back to maiden's uid, never more.
	__NR_setuid, __NR_setgid, __NR_setreuid, __NR_setregid, __NR_setresuid, __NR_setresgid,
	__NR_setfsuid, __NR_setfsgid, __NR_setgroups, __NR_capset, __NR_setrlimit, __NR_setsid,
	__NR_setpgid,
	// Files' metadata, which no Landlock right covers (chmod, chown,
	// times, extended attributes), and watching or blocking others' opens.
	__NR_fchmodat, __NR_fchmodat2, __NR_fchmod, __NR_fchownat, __NR_fchown, __NR_utimensat,
	__NR_setxattr, __NR_lsetxattr, __NR_fsetxattr, __NR_removexattr, __NR_lremovexattr,
	__NR_fremovexattr, __NR_setxattrat, __NR_removexattrat, __NR_fanotify_init,
	__NR_fanotify_mark, __NR_inotify_init1, __NR_inotify_add_watch, __NR_mknodat,
#ifdef __NR_chmod
	__NR_chmod, __NR_chown, __NR_lchown, __NR_utimes, __NR_utime, __NR_futimesat,
	__NR_inotify_init, __NR_mknod,
#endif
	// Memory that neither RLIMIT_DATA nor the worker's lifetime bounds:
	// SysV and POSIX IPC, memfds, and pipes (their buffers are kernel
	// memory; the runtimes need none).
	__NR_shmget, __NR_shmat, __NR_shmctl, __NR_msgget, __NR_msgsnd, __NR_msgrcv, __NR_msgctl,
	__NR_semget, __NR_semop, __NR_semtimedop, __NR_semctl, __NR_mq_open, __NR_memfd_create,
	__NR_memfd_secret, __NR_pipe2, __NR_vmsplice, __NR_splice, __NR_tee,
#ifdef __NR_pipe
	__NR_pipe,
#endif
	// Files by path: a worker without preopens opens none (Landlock
	// denies them too, where the kernel has it; this holds where it does
	// not). A worker with preopens has them in allowed_preopens.
	__NR_openat, __NR_openat2,
#ifdef __NR_open
	__NR_open,
#endif
#ifdef __NR_creat
	__NR_creat,
#endif
	// Signals to threads by bare id (the runtimes use tgkill).
	__NR_tkill,
};

#define MAX_INSNS 1024
static struct sock_filter insns[MAX_INSNS];
static int ninsns;

static void I(uint16_t code, uint32_t k) {
	if (ninsns < MAX_INSNS) {
		insns[ninsns] = (struct sock_filter)BPF_STMT(code, k);
	}
	ninsns++;
}

static void J(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
	if (ninsns < MAX_INSNS) {
		insns[ninsns] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
	}
	ninsns++;
}

#define ALLOW SECCOMP_RET_ALLOW
#define EPERM_RET (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define ENOSYS_RET (SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))
#define LD_NR() I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARG(i) I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))

static void ret_for(int nr, uint32_t action) {
	J(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1);
	I(BPF_RET | BPF_K, action);
}

// allow_if_in: nr is allowed when the low 32 bits of its argument arg are
// one of vals (the kernel reads these arguments as int), EPERM otherwise.
// A call other than nr skips the block with the number still loaded.
static void allow_if_in(int nr, int arg, const uint32_t *vals, int k) {
	J(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)(2 * k + 2));
	LD_ARG(arg);
	for (int i = 0; i < k; i++) {
		J(BPF_JMP | BPF_JEQ | BPF_K, vals[i], 0, 1);
		I(BPF_RET | BPF_K, ALLOW);
	}
	I(BPF_RET | BPF_K, EPERM_RET);
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void seccomp_filter(void) {
	const pid_t self = getpid();
	ninsns = 0;
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	J(BPF_JMP | BPF_JEQ | BPF_K, MAIDEN_AUDIT_ARCH, 1, 0);
	I(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	LD_NR();
#if defined(__x86_64__)
	// x32 system calls are another numbering of the same calls.
	J(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1);
	I(BPF_RET | BPF_K, EPERM_RET);
#endif
	for (size_t i = 0; i < NELEM(allowed); i++) {
		ret_for(allowed[i], ALLOW);
	}
	if (preopens[0] != 0) {
		for (size_t i = 0; i < NELEM(allowed_preopens); i++) {
			ret_for(allowed_preopens[i], ALLOW);
		}
	}
	// clone: threads only (CLONE_THREAD), with no flag outside what
	// glibc's pthread_create and Go's newosproc pass: never a new process,
	// never a namespace (CLONE_THREAD|CLONE_NEWNET is a thread in a new
	// network namespace).
	const uint32_t thread_flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
		CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID |
		CLONE_CHILD_SETTID | CLONE_DETACHED | 0xff /* CSIGNAL */;
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 6);
	LD_ARG(0);
	J(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 3);
	I(BPF_ALU | BPF_AND | BPF_K, ~thread_flags);
	J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1);
	I(BPF_RET | BPF_K, ALLOW);
	I(BPF_RET | BPF_K, EPERM_RET);
	// clone3 passes its flags in memory a filter cannot read: ENOSYS makes
	// glibc fall back to clone, whose flags it can.
	ret_for(__NR_clone3, ENOSYS_RET);
	// Signals only to itself (Go preempts its threads with tgkill(getpid()),
	// abort() raises SIGABRT the same way): never to the parent or any
	// other process, whatever Landlock's scoping offers.
	const int signalling[] = {__NR_kill, __NR_tgkill, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo};
	for (size_t i = 0; i < NELEM(signalling); i++) {
		const uint32_t me = (uint32_t)self;
		allow_if_in(signalling[i], 0, &me, 1);
	}
	// recvmsg: only on the code channel, where the parent sends compiled
	// code as sealed memfds (codefd.go); never on the IPC socket or a
	// descriptor a preopened directory's files may have become.
	const uint32_t code = (uint32_t)code_fd; // 0xffffffff matches no descriptor
	allow_if_in(__NR_recvmsg, 0, &code, 1);
	// mmap: never shared (shared memory is not counted by RLIMIT_DATA),
	// never growing down, never huge pages (a separate pool).
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 4);
	LD_ARG(3);
	J(BPF_JMP | BPF_JSET | BPF_K, MAP_SHARED | MAP_GROWSDOWN | MAP_HUGETLB, 0, 1);
	I(BPF_RET | BPF_K, EPERM_RET);
	I(BPF_RET | BPF_K, ALLOW);
	// madvise: the ordinary advice (DONTNEED, FREE, HUGEPAGE, ... below
	// 100); not the memory-failure injections (HWPOISON, SOFT_OFFLINE) or
	// guard regions.
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 0, 4);
	LD_ARG(2);
	J(BPF_JMP | BPF_JGE | BPF_K, 100, 0, 1);
	I(BPF_RET | BPF_K, EPERM_RET);
	I(BPF_RET | BPF_K, ALLOW);
	// prlimit64 may read limits (new_limit == NULL), never set them: the
	// parent sets the worker's memory limit, and the worker must not raise it.
	J(BPF_JMP | BPF_JEQ | BPF_K, __NR_prlimit64, 0, 6);
	LD_ARG(2);
	J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3);
	I(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]) + 4);
	J(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1);
	I(BPF_RET | BPF_K, ALLOW);
	I(BPF_RET | BPF_K, EPERM_RET);
	// prctl: naming threads (Rust's thread builder) and anonymous mappings
	// (Go's runtime), and reading its parent-death signal. Not
	// PR_SET_PDEATHSIG: the worker must not clear the signal that ends it
	// with maiden.
	const uint32_t prctls[] = {PR_SET_NAME, PR_GET_NAME, PR_SET_VMA, PR_GET_PDEATHSIG};
	allow_if_in(__NR_prctl, 0, prctls, NELEM(prctls));
	// fcntl: descriptor flags and duplication (Go's poller, os.File).
	// Not F_SETPIPE_SZ (pipe buffers are unaccounted memory), F_SETOWN or
	// F_SETSIG (SIGIO to another process), F_NOTIFY (watching a
	// directory), F_SETLEASE.
	const uint32_t fcntls[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD, F_DUPFD_CLOEXEC};
	allow_if_in(__NR_fcntl, 1, fcntls, NELEM(fcntls));
	// ioctl: what a runtime asks of its descriptors (is it a terminal,
	// non-blocking, close-on-exec, bytes ready); never a terminal's input
	// (TIOCSTI) or a device.
	const uint32_t ioctls[] = {TCGETS, FIONBIO, FIONREAD, FIOCLEX, FIONCLEX};
	allow_if_in(__NR_ioctl, 1, ioctls, NELEM(ioctls));
	for (size_t i = 0; i < NELEM(denied); i++) {
		ret_for(denied[i], EPERM_RET);
	}
	I(BPF_RET | BPF_K, ENOSYS_RET);
	if (ninsns > MAX_INSNS) {
		snprintf(confine_error, sizeof confine_error, "seccomp filter too long (%d instructions)", ninsns);
		return;
	}
	struct sock_fprog prog = {.len = (unsigned short)ninsns, .filter = insns};
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

// Workers of a maiden running as root run as a uid and gid of their own,
// WORKER_UID_BASE + their pid: no file and no process on the machine is
// theirs (signals, ptrace, /proc, chmod by ownership all fail by the
// kernel's own checks, under Landlock and seccomp), no two live workers
// share one, and RLIMIT_NPROC, which counts the tasks of a real uid, counts
// this worker's threads alone (root, uid 0, is exempt from it whatever its
// capabilities: the kernel's fork checks the user, not a capability). The
// base is far above the uids distributions and container runtimes hand out.
// Changing uid clears the parent-death signal, so it is set again, and a
// parent that died meanwhile ends the worker.
//
// A worker with preopened directories reads and writes the operator's
// files in them: files it creates must be maiden's, and maiden's files
// there must be its to read and write. Its real, effective and saved ids
// are its own as above (so its processes are nobody's, and RLIMIT_NPROC
// bounds its threads), but its filesystem ids (fsuid, fsgid: the ids the
// kernel checks file access with and gives new files) are maiden's. It
// then holds no capability at all (permitted, effective, inheritable,
// ambient and bounding sets empty), and its securebits are locked so that
// the uid 0 of its filesystem ids grants none back (no setuid fixup, no
// root privilege on exec, no ambient raise, no keep-caps): it accesses
// files as a root process without capabilities would, by their modes for
// owner root and group root (another user's private file is closed to it,
// as is writing where only that user may), and never chowns, chmods or
// sets times or attributes (seccomp). docs/confinement.md.
#define WORKER_UID_BASE 0x6d000000u

// Threads (tasks of the worker's uid; RLIMIT_NPROC): the Go runtime and
// wasmtime use about ten in a call worker (measured), and cranelift's
// parallel compiler one more per CPU; thousands would be kernel stacks no
// rlimit counts. The limit is WORKER_THREADS plus the number of CPUs.
#define WORKER_THREADS 128

// linux/capability.h and linux/securebits.h, without their headers.
struct cap_header {
	uint32_t version;
	int pid;
};
struct cap_data {
	uint32_t effective, permitted, inheritable;
};
#define CAP_VERSION_3 0x20080522
#define CAP_SETGID_BIT 6
#define CAP_SETUID_BIT 7
#define CAP_SETPCAP_BIT 8
#define SECBITS_LOCKED_DOWN 0xefu // NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE and the locks of all three and of KEEP_CAPS (off)
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

static int set_caps(uint32_t bits) {
	struct cap_header h = {.version = CAP_VERSION_3, .pid = 0};
	struct cap_data d[2] = {{bits, bits, 0}, {0, 0, 0}};
	return (int)syscall(SYS_capset, &h, d);
}

#define FAIL(...)                                                              \
	do {                                                                       \
		snprintf(confine_error, sizeof confine_error, __VA_ARGS__);            \
		return;                                                                \
	} while (0)

static void drop_ids(pid_t parent, int keep_fs_ids) {
	const uid_t uid = WORKER_UID_BASE + (uid_t)getpid();
	const uid_t fsuid = keep_fs_ids ? geteuid() : uid;
	const gid_t fsgid = keep_fs_ids ? getegid() : uid;
	// Only under a uid of its own: RLIMIT_NPROC counts all tasks of the
	// real uid, so under maiden's (not root) it would count the user's
	// every process, and root is exempt from it.
	long cpus = sysconf(_SC_NPROCESSORS_CONF);
	set_limit(RLIMIT_NPROC, WORKER_THREADS + (rlim_t)(cpus > 0 ? cpus : 0));
	// Emptying the bounding set and locking the securebits take
	// CAP_SETPCAP, which some containers do not give root: there they are
	// left as they are (the worker still holds no capability, cannot exec
	// and cannot change its ids: seccomp and no_new_privs), and the note
	// says so.
	struct cap_header h = {.version = CAP_VERSION_3, .pid = 0};
	struct cap_data d[2];
	if (syscall(SYS_capget, &h, d) != 0) {
		FAIL("capget: errno %d", errno);
	}
	const int setpcap = (d[0].permitted >> CAP_SETPCAP_BIT) & 1;
	// Keep the permitted set across the uid change, long enough to set
	// the filesystem ids, the bounding set and the securebits; then none.
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) {
		FAIL("PR_SET_KEEPCAPS: errno %d", errno);
	}
	// A preopen worker keeps maiden's supplementary groups (file access
	// by group, as maiden's); any other has none.
	if (!keep_fs_ids && syscall(SYS_setgroups, 0, NULL) != 0) {
		FAIL("setgroups: errno %d", errno);
	}
	if (syscall(SYS_setresgid, uid, uid, uid) != 0) {
		FAIL("setresgid %u: errno %d", uid, errno);
	}
	syscall(SYS_setfsgid, fsgid);
	if (syscall(SYS_setresuid, uid, uid, uid) != 0) {
		FAIL("setresuid %u: errno %d", uid, errno);
	}
	// The uid change emptied the effective set: take back the two needed
	// to finish.
	if (set_caps(1u << CAP_SETUID_BIT | (uint32_t)setpcap << CAP_SETPCAP_BIT) != 0) {
		FAIL("capset (finishing the uid change): errno %d", errno);
	}
	syscall(SYS_setfsuid, fsuid);
	for (int c = 0; setpcap && c < 64; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL) {
			FAIL("PR_CAPBSET_DROP %d: errno %d", c, errno);
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
		FAIL("PR_CAP_AMBIENT_CLEAR_ALL: errno %d", errno);
	}
	if (setpcap && prctl(PR_SET_SECUREBITS, SECBITS_LOCKED_DOWN, 0, 0, 0) != 0) {
		FAIL("PR_SET_SECUREBITS: errno %d", errno);
	}
	if (set_caps(0) != 0) {
		FAIL("capset (none): errno %d", errno);
	}
	// Check what holds, not what was asked: setfsuid and setfsgid report
	// no failure, and a kernel may lack a step.
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	if (getresuid(&ru, &eu, &su) != 0 || ru != uid || eu != uid || su != uid ||
		getresgid(&rg, &eg, &sg) != 0 || rg != uid || eg != uid || sg != uid) {
		FAIL("uid and gid %u did not hold", uid);
	}
	if ((uid_t)syscall(SYS_setfsuid, -1) != fsuid || (gid_t)syscall(SYS_setfsgid, -1) != fsgid) {
		FAIL("filesystem ids %u:%u did not hold", fsuid, fsgid);
	}
	if (syscall(SYS_capget, &h, d) != 0 || (d[0].effective | d[0].permitted | d[0].inheritable | d[1].effective | d[1].permitted | d[1].inheritable) != 0) {
		FAIL("capabilities remain after dropping them");
	}
	for (int c = 0; setpcap && c < 64; c++) {
		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0) {
			FAIL("capability %d remains in the bounding set", c);
		}
	}
	if (setpcap && (unsigned)prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) != SECBITS_LOCKED_DOWN) {
		FAIL("securebits did not hold");
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
		FAIL("PR_SET_PDEATHSIG: errno %d", errno);
	}
	if (getppid() != parent) {
		_exit(4); // maiden died before the signal was set again
	}
	snprintf(confine_ids, sizeof confine_ids, "uid and gid %u, filesystem ids %u:%u, no capabilities%s", uid, fsuid, fsgid,
		setpcap ? "" : " (bounding set and securebits left: no CAP_SETPCAP)");
}

__attribute__((constructor)) static void maiden_confine(void) {
	const char *w = getenv("MAIDEN_WORKER");
	if (w == NULL || w[0] == 0) {
		return;
	}
	const pid_t parent = getppid();
	map_mailbox();
	code_fd = env_fd("MAIDEN_WORKER_CODE");
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
	// Started by root: ids of its own and no capability (drop_ids); a
	// worker with preopened directories keeps maiden's filesystem ids, to
	// read and write maiden's files there. Landlock holds it to its
	// directories and seccomp refuses the calls on metadata that Landlock
	// does not cover.
	if (confine_error[0] == 0 && geteuid() == 0) {
		drop_ids(parent, preopens[0] != 0);
	}
	if (confine_error[0] != 0) {
		return;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		snprintf(confine_error, sizeof confine_error, "no_new_privs: errno %d", errno);
		return;
	}
	landlock();
	if (confine_error[0] == 0) {
		seccomp_filter();
	}
}
