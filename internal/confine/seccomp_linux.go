package confine

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// The seccomp filter covers what Landlock does not:
//   - socket(): with no network, every socket is refused (EACCES), so UDP,
//     raw and netlink sockets too, whatever the kernel's Landlock ABI; with
//     a proxy port, only TCP stream sockets over IPv4 or IPv6 (protocol 0 or
//     IPPROTO_TCP), which Landlock's port rule then confines. Unix sockets
//     are refused either way: connecting to a named socket (a Docker or
//     D-Bus socket, say) is not a filesystem access Landlock checks before
//     ABI 9's RESOLVE_UNIX.
//   - sendto, sendmsg and sendmmsg carrying MSG_FASTOPEN (in the call's
//     flags argument; a msghdr's msg_flags are not read on send): refused
//     (EPERM). TCP Fast Open connects implicitly, inside the send, and
//     Landlock's connect rule (a hook on connect(2)) never sees it: with
//     it a CLI reached any port on any address.
//   - listen: refused (EPERM). listen(2) on an unbound socket binds it
//     implicitly to an ephemeral port on every address, and Landlock's
//     bind rule (a hook on bind(2)) never sees that either. A wrapped CLI
//     accepts nothing.
//   - io_uring_setup, io_uring_enter, io_uring_register (io_uring can
//     create sockets, connect and bind without the system calls above),
//     setsid and setpgid (leaving the process group that is killed at the
//     deadline): refused (EPERM).
// A call from another architecture (x32 on x86_64, say) kills the process.
// The probe (probe_linux.go) tries each of these and fails closed unless the
// filter's own errno comes back.

type insn struct {
	code   uint16
	k      uint32
	jt, jf string // labels; "" = next instruction
}

const (
	ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	andK  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	retK  = unix.BPF_RET | unix.BPF_K
	label = 0xffff // pseudo-instruction marking a label (k unused)

	offNr   = 0
	offArch = 4
)

func offArg(i int) uint32 { return 16 + 8*uint32(i) }

// Rules of the filter that a test may leave out (omitRule) to plant the hole
// it closes and see the probe and the hostile tests catch it.
const (
	ruleFastOpen = "fastopen"
	ruleListen   = "listen"
	ruleIOUring  = "io_uring"
	ruleNetNS    = "netns" // not a seccomp rule: runs without their network namespace
)

// omitRule, when not empty, names a rule seccompFilter leaves out. Tests
// only: nothing else sets it.
var omitRule string

// seccompFilter assembles the filter; network says whether TCP sockets are
// allowed.
func seccompFilter(network bool) ([]unix.SockFilter, error) {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return nil, fmt.Errorf("seccomp filter not written for %s", runtime.GOARCH)
	}
	deny := func(errno unix.Errno) uint32 { return unix.SECCOMP_RET_ERRNO | uint32(errno)&unix.SECCOMP_RET_DATA }
	p := []insn{
		{code: ldW, k: offArch},
		{code: jeq, k: arch, jf: "kill"},
		{code: ldW, k: offNr},
	}
	if runtime.GOARCH == "amd64" {
		p = append(p, insn{code: jge, k: 0x40000000, jt: "kill"})
	}
	eperm := []uintptr{unix.SYS_SETSID, unix.SYS_SETPGID}
	if omitRule != ruleIOUring {
		eperm = append(eperm, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER)
	}
	if omitRule != ruleListen {
		eperm = append(eperm, unix.SYS_LISTEN)
	}
	for _, nr := range eperm {
		p = append(p, insn{code: jeq, k: uint32(nr), jt: "eperm"})
	}
	if omitRule != ruleFastOpen {
		// The flags are an int: the low 32 bits of the argument.
		p = append(p,
			insn{code: jeq, k: unix.SYS_SENDTO, jt: "flags3"},
			insn{code: jeq, k: unix.SYS_SENDMMSG, jt: "flags3"},
			insn{code: jeq, k: unix.SYS_SENDMSG, jt: "flags2"},
		)
	}
	socket := "eacces"
	if network {
		socket = "inet-socket"
	}
	p = append(p, insn{code: jeq, k: unix.SYS_SOCKET, jt: socket, jf: "allow"})
	if omitRule != ruleFastOpen {
		p = append(p,
			insn{code: label, jt: "flags3"},
			insn{code: ldW, k: offArg(3)},
			insn{code: jset, k: unix.MSG_FASTOPEN, jt: "eperm", jf: "allow"},
			insn{code: label, jt: "flags2"},
			insn{code: ldW, k: offArg(2)},
			insn{code: jset, k: unix.MSG_FASTOPEN, jt: "eperm", jf: "allow"},
		)
	}
	if network {
		p = append(p,
			insn{code: label, jt: "inet-socket"},
			insn{code: ldW, k: offArg(0)},
			insn{code: jeq, k: unix.AF_INET, jt: "inet"},
			insn{code: jeq, k: unix.AF_INET6, jt: "inet", jf: "eacces"},
			insn{code: label, jt: "inet"},
			insn{code: ldW, k: offArg(1)},
			insn{code: andK, k: 0xf},
			insn{code: jeq, k: unix.SOCK_STREAM, jf: "eacces"},
			insn{code: ldW, k: offArg(2)},
			insn{code: jeq, k: 0, jt: "allow"},
			insn{code: jeq, k: unix.IPPROTO_TCP, jt: "allow", jf: "eacces"},
		)
	}
	p = append(p,
		insn{code: label, jt: "eacces"},
		insn{code: retK, k: deny(unix.EACCES)},
		insn{code: label, jt: "eperm"},
		insn{code: retK, k: deny(unix.EPERM)},
		insn{code: label, jt: "kill"},
		insn{code: retK, k: unix.SECCOMP_RET_KILL_PROCESS},
		insn{code: label, jt: "allow"},
		insn{code: retK, k: unix.SECCOMP_RET_ALLOW},
	)
	// Resolve labels to relative forward jumps.
	pos := map[string]int{}
	n := 0
	for _, in := range p {
		if in.code == label {
			pos[in.jt] = n
			continue
		}
		n++
	}
	out := make([]unix.SockFilter, 0, n)
	for _, in := range p {
		if in.code == label {
			continue
		}
		here := len(out)
		rel := func(l string) (uint8, error) {
			if l == "" {
				return 0, nil
			}
			to, ok := pos[l]
			if !ok || to <= here || to-here-1 > 255 {
				return 0, fmt.Errorf("seccomp: bad jump to %s", l)
			}
			return uint8(to - here - 1), nil
		}
		f := unix.SockFilter{Code: in.code, K: in.k}
		if in.code&0x07 == unix.BPF_JMP {
			var err error
			if f.Jt, err = rel(in.jt); err != nil {
				return nil, err
			}
			if f.Jf, err = rel(in.jf); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
	}
	return out, nil
}
