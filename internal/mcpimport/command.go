package mcpimport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxStderrLine caps one line of the upstream's stderr in the operator's log.
const maxStderrLine = 4 << 10

// stderrTailLines and stderrTailBytes bound what is kept of a command's
// last stderr lines (StderrTail): enough for the reason a program gives
// for not starting (Node prints two lines for an unreadable openssl.cnf).
const (
	stderrTailLines = 8
	stderrTailBytes = 512
)

// startCommand starts the stdio command through Options.Start and returns
// it, a channel that receives its Wait result once (and is refilled by
// whoever reads it, so that several can learn of the exit), and the
// transport over its pipes.
func (u *Upstream) startCommand() (*exec.Cmd, chan error, mcp.Transport, error) {
	argv := u.opts.Command
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append([]string{}, u.opts.Env...)
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit maiden's environment
	}
	cmd.Dir = u.opts.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	start := u.opts.Start
	if start == nil {
		start = (*exec.Cmd).Start
	}
	if err := start(cmd); err != nil {
		return nil, nil, nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	if cmd.Process == nil {
		return nil, nil, nil, errors.New("Options.Start returned without starting the command")
	}
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, nil, errors.New("Options.Start cleared SysProcAttr.Setpgid (the upstream must have its own process group)")
	}
	pid := cmd.Process.Pid
	u.mu.Lock()
	u.stderrTail = nil // this process's lines, not the last one's
	u.mu.Unlock()
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		u.relayStderr(stderr, pid)
	}()
	exited := make(chan error, 1)
	go func() {
		// Wait closes the pipes only after the process exited and stderr
		// was drained, so read it all first.
		<-stderrDone
		exited <- cmd.Wait()
	}()
	return cmd, exited, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: u.opts.MaxMessageBytes}, nil
}

// relayStderr logs the upstream's stderr line by line (each line capped)
// and keeps its last lines (StderrTail). stderr is the operator's: it never
// reaches an agent.
func (u *Upstream) relayStderr(r io.Reader, pid int) {
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, isPrefix, err := br.ReadLine()
		if len(line) > 0 {
			u.log.Debug("MCP upstream stderr", "pid", pid, "line", string(line))
			u.keepStderr(string(line[:min(len(line), stderrTailBytes)]))
		}
		for isPrefix && err == nil { // the rest of an over-long line
			_, isPrefix, err = br.ReadLine()
		}
		if err != nil {
			return
		}
	}
}

func (u *Upstream) keepStderr(line string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.stderrTail) == stderrTailLines {
		u.stderrTail = append(u.stderrTail[:0], u.stderrTail[1:]...)
	}
	u.stderrTail = append(u.stderrTail, line)
}

// StderrTail returns the last lines (at most 8, each cut at 512 bytes) the
// stdio command wrote on its stderr: the running process's, or the last
// one's while it is down (the reason a program gives for not starting).
// They are the operator's to read, as raw as the program wrote them
// (escape them before printing them to a terminal); never show them to an
// agent.
func (u *Upstream) StderrTail() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.stderrTail...)
}
