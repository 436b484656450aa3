// hostilecli is a wrapped CLI that tries to get around maiden's egress proxy
// and confinement (issue 22): TCP Fast Open to a port that is not the
// proxy's, listen on an unbound socket, io_uring. It prints "ok ..." when an
// attempt worked and "refused: ERRNO" when it did not; the root package's
// TestWrappedCLIHostileNetwork builds it (go build) and runs it as
// [clis.hostile] with http_allow, through the Host.
//
//	hostilecli fastopen IP:PORT   sendto with MSG_FASTOPEN, then read the reply
//	hostilecli listen             listen(2) on a socket never bound
//	hostilecli iouring            io_uring_setup, io_uring_enter, io_uring_register
//
// Only the standard library: it is built from this one file.
package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

func errno(err error) string {
	if e, ok := err.(syscall.Errno); ok {
		for name, v := range map[string]syscall.Errno{"EPERM": syscall.EPERM, "EACCES": syscall.EACCES, "ECONNREFUSED": syscall.ECONNREFUSED, "EBADF": syscall.EBADF, "EINVAL": syscall.EINVAL, "ENOSYS": syscall.ENOSYS} {
			if e == v {
				return name
			}
		}
		return fmt.Sprintf("errno %d", int(e))
	}
	return err.Error()
}

func fastOpen(addr string) string {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err.Error()
	}
	family := syscall.AF_INET6
	var sa syscall.Sockaddr = &syscall.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	if ap.Addr().Is4() {
		family = syscall.AF_INET
		sa = &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "refused: " + errno(err)
	}
	defer syscall.Close(fd)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 10})
	if err := syscall.Sendto(fd, []byte("hello"), syscall.MSG_FASTOPEN, sa); err != nil {
		return "refused: " + errno(err)
	}
	buf := make([]byte, 64)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		return "ok, sent, no reply: " + errno(err)
	}
	return "ok, reply " + string(buf[:n])
}

func listen() string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return "refused: " + errno(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Listen(fd, 1); err != nil {
		return "refused: " + errno(err)
	}
	sa, _ := syscall.Getsockname(fd)
	return fmt.Sprintf("ok, listening on %v", sa)
}

// The system call numbers of io_uring are the same on x86_64 and arm64.
const (
	sysIOUringSetup    = 425
	sysIOUringEnter    = 426
	sysIOUringRegister = 427
)

func ioUring() string {
	var params [120]byte
	var out []string
	fd, _, e := syscall.Syscall(sysIOUringSetup, 1, uintptr(unsafe.Pointer(&params)), 0)
	if e == 0 {
		syscall.Close(int(fd))
		out = append(out, "setup ok")
	} else {
		out = append(out, "setup "+errno(e))
	}
	_, _, e = syscall.Syscall6(sysIOUringEnter, ^uintptr(0), 0, 0, 0, 0, 0)
	out = append(out, "enter "+errno(e))
	_, _, e = syscall.Syscall6(sysIOUringRegister, ^uintptr(0), 0, 0, 0, 0, 0)
	out = append(out, "register "+errno(e))
	return strings.Join(out, ", ")
}

func main() {
	a := os.Args[1:]
	if len(a) > 0 && a[0] == "--" {
		a = a[1:]
	}
	if len(a) == 0 {
		fmt.Fprintln(os.Stderr, "usage: hostilecli fastopen IP:PORT | listen | iouring")
		os.Exit(2)
	}
	switch a[0] {
	case "fastopen":
		if len(a) < 2 {
			os.Exit(2)
		}
		fmt.Print(fastOpen(a[1]))
	case "listen":
		fmt.Print(listen())
	case "iouring":
		fmt.Print(ioUring())
	default:
		fmt.Fprintln(os.Stderr, "unknown attempt", a[0])
		os.Exit(2)
	}
}
