package confine

import (
	"errors"
	"os"
	"strings"
	"time"
)

// Spec is one confined run.
type Spec struct {
	// Path is the executable, an absolute path. It runs directly (execve),
	// never through a shell; argv[0] is Path.
	Path string
	// Args are argv[1:], passed as they are.
	Args []string
	// Dir is the working directory ("" = the caller's). It is not made
	// readable by itself: list it in ReadOnly or Writable if the program
	// reads or writes there.
	Dir string
	// Env is the program's whole environment, "NAME=value" entries; nothing
	// of the caller's environment is passed (see [AllowEnv]).
	Env []string
	// Stdin is the program's standard input; nil means /dev/null.
	Stdin []byte

	// ReadOnly are paths (files or directory trees) the program may read
	// and execute. Writable are paths it may also write, create and remove
	// in. Both are added to [StartPaths]. A path that does not exist is an
	// error, and so is one with a symlink anywhere on it: they are decided
	// by name (the configuration's read_paths and write_paths, the cards),
	// and a link there, which whoever writes its parent can make between
	// two runs, would lead the rule anywhere.
	ReadOnly, Writable []string
	// SystemReadOnly are read-only paths the caller adds itself, fixed
	// system files no one it confines names (the CA bundle, OpenSSL's
	// configuration): like the start paths they are opened following
	// links (/etc/ssl/certs is one on some systems).
	SystemReadOnly []string
	// ProxyPort, if not 0, is the one TCP port the program may connect to
	// (the egress CONNECT proxy on 127.0.0.1); 0 means no network at all.
	// Landlock rules are per port, not per address: see docs/confinement.md.
	ProxyPort int

	// Timeout bounds the run (also bounded by the context); at the deadline
	// the whole process group is killed. 0 means the context alone.
	Timeout time.Duration
	// MaxOutput caps stdout and stderr each, in bytes; 0 means
	// DefaultMaxOutput. What is over the cap is read and dropped.
	MaxOutput int64
	// Limits are the rlimits; zero fields take the defaults.
	Limits Limits

	// Unconfined lets the run go ahead without Landlock where the kernel
	// lacks it (or lacks network rules while ProxyPort is set). The rest
	// (rlimits, no_new_privs, seccomp, process group) still applies, and
	// Result.Unconfined says so.
	Unconfined bool
}

// Limits are the program's rlimits (soft = hard, so it cannot raise them).
type Limits struct {
	// Memory is RLIMIT_DATA in bytes (private writable memory: heap,
	// anonymous mappings); default DefaultMemory.
	Memory uint64
	// Processes is RLIMIT_NPROC (counted per real user ID across the whole
	// machine, and ignored for root); default DefaultProcesses.
	Processes uint64
	// FileSize is RLIMIT_FSIZE in bytes, the largest file it may write;
	// default DefaultFileSize.
	FileSize uint64
	// Files is RLIMIT_NOFILE; default DefaultFiles.
	Files uint64
}

// Defaults.
const (
	DefaultMaxOutput = 1 << 20
	DefaultMemory    = 1 << 30
	DefaultProcesses = 256
	DefaultFileSize  = 64 << 20
	DefaultFiles     = 256
)

func (l Limits) withDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.FileSize == 0 {
		l.FileSize = DefaultFileSize
	}
	if l.Files == 0 {
		l.Files = DefaultFiles
	}
	return l
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the program's exit status, or -1 if a signal ended it.
	ExitCode int
	// Signal names the signal that ended it ("" if it exited).
	Signal string
	// TimedOut is set when the deadline (or the context) ended the run: the
	// process group was killed.
	TimedOut bool
	// Stdout and Stderr are what the program wrote, up to the cap each.
	Stdout, Stderr []byte
	// StdoutDropped and StderrDropped count the bytes over the cap that
	// were read and dropped (0: nothing was cut).
	StdoutDropped, StderrDropped int64
	// Unconfined is set when Landlock was not applied (Spec.Unconfined on
	// a kernel without it): every result of such a run must say so.
	Unconfined bool
	// Landlock is the Landlock ABI the run was confined with (0: none).
	Landlock int
	// NetNS is set when the run (one with a ProxyPort) had a network
	// namespace of its own where only the proxy exists; unset where this
	// process cannot create one (not root, and no unprivileged user
	// namespaces): then Landlock's port rule and seccomp alone confine its
	// network.
	NetNS    bool
	Duration time.Duration
}

// ErrNotEnforced is returned (wrapped) when the confinement a Spec asks for
// cannot be enforced here and Spec.Unconfined is not set.
var ErrNotEnforced = errors.New("confinement not enforced")

// AllowEnv returns the entries of the current environment whose names are
// in names, in names' order: the way to build Spec.Env from an allowlist.
func AllowEnv(names ...string) []string {
	var out []string
	for _, n := range names {
		if n == "" || strings.ContainsRune(n, '=') {
			continue
		}
		if v, ok := os.LookupEnv(n); ok {
			out = append(out, n+"="+v)
		}
	}
	return out
}
