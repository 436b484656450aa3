// Package clitool runs wrapped CLIs ([clis.NAME]): an existing program
// described as a command tree (internal/command), whose validated call is
// run confined (internal/confine: Landlock, seccomp, rlimits, its own
// process group killed at the deadline, capped output) with argv built only
// from the call's rendering: what was authorized is exactly what runs, and
// there is never a shell.
//
// The root's wrapped-CLI backend (clis.go) parses the call with Spec,
// decides the environment (Env), the paths and the network (its CONNECT
// proxy, the session's boundary), then runs it:
//
//	out, err := clitool.Run(ctx, clitool.Call{Tool: t, Cmd: cmd, Env: env, Dir: dir, ReadOnly: ro, Redact: redact})
package clitool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/confine"
)

// Spec is the CLI's description with its options' environment fallbacks
// read from the CLI's own environment (agent.toml's env), so that a value
// taken from the environment is part of the rendering the cards decide on;
// those variables are then not passed (Env), the value reaching the
// program only as the argument that was authorized.
func Spec(cli *config.CLI) *command.Spec {
	if len(cli.Command.EnvNames()) == 0 {
		return cli.Command
	}
	return cli.Command.WithEnv(func(name string) (string, bool) {
		for _, e := range cli.Env {
			k, v, set := strings.Cut(e, "=")
			if k != name {
				continue
			}
			if set {
				return v, true
			}
			return os.LookupEnv(name)
		}
		return "", false
	})
}

// Describe is a wrapped CLI's description and input schema as tools/list
// shows them, from its command description, and a digest of both with its
// path.
func Describe(t config.Tool) (description, schema, digest string) {
	spec := t.CLI.Command
	schema = spec.JSONSchema()
	sum := sha256.Sum256([]byte("cli\x00" + t.Path + "\x00" + schema))
	description = spec.Root.Summary
	if spec.Root.Description != "" {
		description = strings.TrimSpace(description + "\n\n" + spec.Root.Description)
	}
	if description == "" {
		description = "Runs " + t.Path + " (a wrapped CLI)."
	}
	return description, schema, "cli:" + hex.EncodeToString(sum[:])
}

// Env builds a wrapped CLI's environment: its allowlist (the values of the
// names it lists in this process's environment, or the values it sets) and
// its secrets by name (secret looks them up); nothing else.
func Env(t config.Tool, secret func(name string) (string, bool)) ([]string, error) {
	var env []string
	fallbacks := t.CLI.Command.EnvNames()
	for _, e := range t.CLI.Env {
		if name, _, _ := strings.Cut(e, "="); slices.Contains(fallbacks, name) {
			continue // rendered into argv, where the cards saw it
		}
		if strings.Contains(e, "=") {
			env = append(env, e)
		} else if v, ok := os.LookupEnv(e); ok {
			env = append(env, e+"="+v)
		}
	}
	for _, name := range t.Secrets {
		if slices.Contains(fallbacks, name) {
			// config refuses this; a Tool built another way is refused
			// here: the program would read the secret as an option's
			// value the cards never saw.
			return nil, fmt.Errorf("%s: secret %s is also an option's env fallback: the program would read it as that option's value, which no card sees", t.Name, name)
		}
		v, ok := secret(name)
		if !ok {
			return nil, fmt.Errorf("%s: secret %s has no value: set MAIDEN_SECRET_%s", t.Name, name, name)
		}
		env = append(env, name+"="+v)
	}
	return env, nil
}

// Call is one run of a wrapped CLI, everything decided.
type Call struct {
	Tool config.Tool
	Cmd  *command.Invocation // the validated call: argv and stdin come from it only
	Dir  string
	Env  []string
	// ReadOnly and Writable are the Landlock paths (named by their real
	// path: a symlink on one refuses the run); SystemReadOnly the system
	// files the host adds (the CA bundle), which may be reached through
	// links; ProxyPort the one TCP port it may connect to (0: none).
	ReadOnly, Writable, SystemReadOnly []string
	ProxyPort                          int
	// Redact is applied to its stdout and stderr.
	Redact func(string) string
}

// Failure is a run that failed, as the caller sees it.
type Failure struct {
	Kind    api.ErrorKind
	Message string
}

// Outcome is how a run ended: Output (stdout) when Failure is nil; Logs
// always (its stderr lines and the host's warnings).
type Outcome struct {
	Output  string
	Logs    []api.LogEntry
	Failure *Failure
	// Unconfined: it ran without Landlock (unconfined = true on a kernel
	// without it). NoNetNS: it had the network through the proxy without a
	// network namespace of its own.
	Unconfined, NoNetNS bool
}

// Run runs the call confined. The error is ctx's; a program that could not
// run or failed is the Outcome's Failure.
func Run(ctx context.Context, c Call) (Outcome, error) {
	t, cli := c.Tool, c.Tool.CLI
	var stdin []byte
	if s, ok := c.Cmd.Stdin(); ok {
		stdin = []byte(s)
	}
	style := command.StyleEquals
	if cli.SeparateValues {
		style = command.StyleSeparate
	}
	limit := cli.MaxOutputBytes
	if limit <= 0 {
		limit = confine.DefaultMaxOutput
	}
	res, err := confine.Run(ctx, confine.Spec{
		Path: t.Path, Args: c.Cmd.Argv(style), Dir: c.Dir, Env: c.Env, Stdin: stdin,
		ReadOnly: c.ReadOnly, Writable: c.Writable, SystemReadOnly: c.SystemReadOnly, ProxyPort: c.ProxyPort,
		Timeout: t.Timeout, MaxOutput: limit + redactSlack,
		Limits: confine.Limits{Memory: t.MemoryBytes}, Unconfined: cli.Unconfined,
	})
	if err != nil {
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		if errors.Is(err, confine.ErrNotEnforced) {
			return Outcome{Failure: &Failure{api.KindDenied, fmt.Sprintf("%s: %v", t.Name, err)}}, nil
		}
		return Outcome{Failure: &Failure{api.KindTool, fmt.Sprintf("%s: could not run %s: %v", t.Name, t.Path, err)}}, nil
	}
	if res.TimedOut && ctx.Err() != nil {
		// confine kills the process group when ctx ends as at the
		// timeout, and says TimedOut for both: the caller's cancel, or a
		// budget's earlier deadline, is ctx's error, not the tool's
		// overrun.
		return Outcome{}, ctx.Err()
	}
	stdout, cut := redactThenCut(c.Redact, res.Stdout, res.StdoutDropped > 0, limit)
	res.StdoutDropped += cut
	stderr, cut := redactThenCut(c.Redact, res.Stderr, res.StderrDropped > 0, limit)
	res.StderrDropped += cut
	var out Outcome
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if line != "" {
			out.Logs = append(out.Logs, api.LogEntry{Level: api.LevelInfo, Source: api.SourceStderr, Message: line})
		}
	}
	if res.StdoutDropped > 0 || res.StderrDropped > 0 {
		out.Logs = append(out.Logs, api.LogEntry{Level: api.LevelWarn, Source: api.SourceHost, Message: fmt.Sprintf("output over max_output_bytes (%d): %d bytes of stdout and %d of stderr dropped", cli.MaxOutputBytes, res.StdoutDropped, res.StderrDropped)})
	}
	if c.ProxyPort != 0 && !res.NetNS && !res.Unconfined {
		// Landlock's per-port rule and the seccomp filter still hold, but
		// the proxy's port on another address of this host is reachable.
		out.Logs = append(out.Logs, api.LogEntry{Level: api.LevelWarn, Source: api.SourceHost, Message: "no network namespace for this run (the kernel refused one): only Landlock's proxy-port rule and seccomp confine its network"})
		out.NoNetNS = true
	}
	if res.Unconfined {
		out.Unconfined = true
		out.Logs = append(out.Logs, api.LogEntry{Level: api.LevelWarn, Source: api.SourceHost, Message: "unconfined: this ran without Landlock (unconfined = true in agent.toml)"})
	}
	if out.Logs == nil {
		out.Logs = []api.LogEntry{}
	}
	switch {
	case res.TimedOut:
		out.Failure = &Failure{api.KindDeadline, fmt.Sprintf("%s ran past its %v timeout and was killed with its process group", t.Name, t.Timeout)}
	case res.Signal != "":
		out.Failure = &Failure{api.KindTrap, fmt.Sprintf("%s was killed by %s", t.Name, res.Signal)}
	case res.ExitCode != 0:
		msg := fmt.Sprintf("%s exited with status %d", t.Name, res.ExitCode)
		if e, ok := c.Cmd.Command().ErrorFor(res.ExitCode); ok {
			msg += " (" + e.Name + ")"
		}
		if tail := lastLine(stderr); tail != "" {
			msg += ": " + tail
		}
		out.Failure = &Failure{api.KindTool, msg}
	default:
		out.Output = stdout
	}
	return out, nil
}

// redactSlack is how far past max_output_bytes a program's stdout and
// stderr are read, so that an echo of a secret across the cap is whole
// when it is redacted: more than any form of a secret the redactor
// matches (egress's redactSlack, for an http-fetch's body).
const redactSlack = 64 << 10

// redactThenCut redacts raw whole, then cuts it to limit bytes, and says
// how many bytes of the redacted text it cut. Cut first, an echo of a
// secret across the cap left its beginning, which the redactor no longer
// recognises. captureCut says the capture itself (limit + redactSlack)
// ended inside the output: what it ends with may be the beginning of an
// echo too, and redaction may have shortened what came before it to
// within limit (long secrets echoed again and again), so the last
// redactSlack bytes are dropped first.
func redactThenCut(redact func(string) string, raw []byte, captureCut bool, limit int64) (string, int64) {
	s := string(raw)
	if redact != nil {
		s = redact(s)
	}
	n := int64(len(s))
	if captureCut {
		n = max(0, n-redactSlack)
	}
	n = min(n, limit)
	return s[:n], int64(len(s)) - n
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 512 {
		s = s[:512] + "..."
	}
	return s
}
