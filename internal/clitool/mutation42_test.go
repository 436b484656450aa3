//go:build linux

package clitool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/confine"
	"golang.org/x/sys/unix"
)

// The wrapped programs of these tests are this test binary, in a mode
// chosen by an environment variable (the only one it is given besides the
// test's own), run confined through Run as a wrapped CLI is.
const mode42 = "CLITOOL42_MODE"

func TestMain(m *testing.M) {
	confine.Main()
	if mode := os.Getenv(mode42); mode != "" {
		syscall.Exit(child42(mode))
	}
	os.Exit(m.Run())
}

func child42(mode string) int {
	switch mode {
	case "env":
		fmt.Print(strings.Join(os.Environ(), "\n"))
	case "fds": // raw system calls: no descriptor of the Go runtime's poller is opened
		fd, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			syscall.Write(1, []byte("refused: "+err.Error()))
			return 0
		}
		buf := make([]byte, 8192)
		n, _ := syscall.ReadDirent(fd, buf)
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			l, _ := os.Readlink("/proc/self/fd/" + name)
			syscall.Write(1, []byte(name+" "+l+"\n"))
		}
	case "spew": // CLITOOL42_OUT bytes of o to stdout, CLITOOL42_ERR of e to stderr
		n, _ := strconv.Atoi(os.Getenv("CLITOOL42_OUT"))
		m, _ := strconv.Atoi(os.Getenv("CLITOOL42_ERR"))
		os.Stdout.WriteString(strings.Repeat("o", n))
		os.Stderr.WriteString(strings.Repeat("e", m))
	case "echo": // CLITOOL42_TEXT to stdout and stderr, exit CLITOOL42_EXIT
		os.Stdout.WriteString(os.Getenv("CLITOOL42_TEXT"))
		os.Stderr.WriteString(os.Getenv("CLITOOL42_TEXT"))
		n, _ := strconv.Atoi(os.Getenv("CLITOOL42_EXIT"))
		return n
	case "stdin":
		b, _ := io.ReadAll(os.Stdin)
		fmt.Printf("%q", b)
	case "netns":
		l, err := os.Readlink("/proc/self/ns/net")
		if err != nil {
			fmt.Print("refused: ", err)
		}
		fmt.Print(l)
	case "fork-sleeper": // a child in its process group, its pid on stderr, then wait forever
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = []string{mode42 + "=sleep"}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "refused:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, cmd.Process.Pid)
		select {}
	case "sleep":
		select {}
	case "mmap": // CLITOOL42_MB MiB of private writable memory, never touched
		n, _ := strconv.Atoi(os.Getenv("CLITOOL42_MB"))
		if _, err := syscall.Mmap(-1, 0, n<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE); err != nil {
			fmt.Print("refused: ", err)
			return 0
		}
		fmt.Print("ok")
	case "kill-self":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	default:
		return 2
	}
	return 0
}

// run42 runs the program (this binary in mode) as the wrapped CLI tool
// with the input in.
func run42(t *testing.T, ctx context.Context, tool config.Tool, in string, env ...string) Outcome {
	t.Helper()
	inv, err := Spec(tool.CLI).ParseJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(ctx, Call{Tool: tool, Cmd: inv, Env: env, Redact: func(s string) string { return strings.ReplaceAll(s, "SECRET", "[r]") }})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return out
}

func tool42(t *testing.T, command42 string) config.Tool {
	t.Helper()
	if command42 == "" {
		command42 = `{"maiden_command":1,"name":"t"}`
	}
	spec, err := command.Load([]byte(command42))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return config.Tool{Name: "t", Path: self, Timeout: 30 * time.Second, CLI: &config.CLI{Command: spec}}
}

func ctx42(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func warnings42(out Outcome) []string {
	var w []string
	for _, l := range out.Logs {
		if l.Source == api.SourceHost {
			w = append(w, l.Message)
		}
	}
	return w
}

// TestMutation42EnvIsOnlyWhatWasDecided: the program's environment is the
// call's Env and nothing of this process's.
func TestMutation42EnvIsOnlyWhatWasDecided(t *testing.T) {
	t.Setenv("CLITOOL42_PARENT_SECRET", "leak")
	out := run42(t, ctx42(t), tool42(t, ""), `{}`, "A=1", mode42+"=env")
	if out.Failure != nil {
		t.Fatalf("failure %+v", out.Failure)
	}
	if got, want := strings.Split(out.Output, "\n"), []string{"A=1", mode42 + "=env"}; !slices.Equal(got, want) {
		t.Fatalf("the program's environment %q; want exactly %q", got, want)
	}
}

// TestMutation42NoDescriptorsLeak: the program holds none of this
// process's files, not even one left open across exec here (not
// close-on-exec, as a descriptor from a careless library would be).
func TestMutation42NoDescriptorsLeak(t *testing.T) {
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	ours := map[string]bool{}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		// Those an exec would keep: not close-on-exec (the Go runtime's
		// own files, which the program may open too, are).
		fd, _ := strconv.Atoi(e.Name())
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if fd < 3 || err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue
		}
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			ours[l] = true
		}
	}
	if l, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd()))); !ours[l] {
		t.Fatalf("the file left open (%s) is not among this process's descriptors %v", l, ours)
	}
	tool := tool42(t, "")
	inv, err := Spec(tool.CLI).ParseJSON([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(ctx42(t), Call{Tool: tool, Cmd: inv, Env: []string{mode42 + "=fds"}, SystemReadOnly: []string{"/proc"}})
	if err != nil || out.Failure != nil || strings.HasPrefix(out.Output, "refused") {
		t.Fatalf("%q %+v %v", out.Output, out.Failure, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.Output), "\n") {
		fd, target, _ := strings.Cut(line, " ")
		if fd != "0" && fd != "1" && fd != "2" && ours[target] {
			t.Errorf("the program holds descriptor %s: %s, open in this process; want none of its files (all: %q)", fd, target, out.Output)
		}
	}
}

// TestMutation42DeadlineKillsTheGroup: at the tool's timeout the program
// and the child it started are killed; the failure is a deadline, not the
// signal, and says so.
func TestMutation42DeadlineKillsTheGroup(t *testing.T) {
	tool := tool42(t, "")
	tool.Timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	inv, err := Spec(tool.CLI).ParseJSON([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := Run(ctx, Call{Tool: tool, Cmd: inv, Env: []string{mode42 + "=fork-sleeper"}})
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("a program with a 2s timeout ran for %v (the caller's context ends at 20s): %+v, %v; want it killed at its timeout", d.Round(time.Second), out.Failure, err)
	}
	if err != nil {
		t.Fatalf("a program past its 2s timeout (the caller's context 20s): Run = %v; want the run killed at its timeout", err)
	}
	if out.Failure == nil || out.Failure.Kind != api.KindDeadline || out.Failure.Message != "t ran past its 2s timeout and was killed with its process group" {
		t.Fatalf("failure %+v; want a deadline: t ran past its 2s timeout and was killed with its process group", out.Failure)
	}
	if len(out.Logs) == 0 {
		t.Fatal("the program did not say its child's pid")
	}
	pid, err := strconv.Atoi(out.Logs[0].Message)
	if err != nil {
		t.Fatalf("the program's first stderr line %q", out.Logs[0].Message)
	}
	pfd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone already
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pfd)
	// The pidfd is readable when the process has exited: wait for that
	// event, up to 10 s.
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}, 10000)
	if err != nil || n != 1 {
		unix.Kill(pid, unix.SIGKILL)
		t.Fatalf("the program's child %d still running 10 s after the run ended (poll %d, %v)", pid, n, err)
	}
}

// TestMutation42OutputCapSaid: stdout is cut at max_output_bytes exactly;
// a cut of either stream is said with the bytes dropped of each, counted on
// the redacted text; 0 is the default cap.
func TestMutation42OutputCapSaid(t *testing.T) {
	tool := tool42(t, "")
	tool.CLI.MaxOutputBytes = 1000
	ctx := ctx42(t)
	for _, tc := range []struct {
		out, err int
		want     string
	}{
		{1000, 1500, "output over max_output_bytes (1000): 0 bytes of stdout and 500 of stderr dropped"},
		{1500, 0, "output over max_output_bytes (1000): 500 bytes of stdout and 0 of stderr dropped"},
		{1000, 1000, ""},
	} {
		out := run42(t, ctx, tool, `{}`, mode42+"=spew", "CLITOOL42_OUT="+strconv.Itoa(tc.out), "CLITOOL42_ERR="+strconv.Itoa(tc.err))
		if out.Failure != nil || len(out.Output) != 1000 {
			t.Errorf("%d bytes of stdout, %d of stderr under 1000: output %d bytes, failure %+v; want 1000 bytes", tc.out, tc.err, len(out.Output), out.Failure)
		}
		if w := strings.Join(warnings42(out), "|"); w != tc.want {
			t.Errorf("%d bytes of stdout, %d of stderr under 1000: warnings %q; want %q", tc.out, tc.err, w, tc.want)
		}
	}
	// Redaction shortens SECRET (6 bytes) to [r] (3 bytes): 200
	// echoes are 1200 bytes raw, 600 redacted: nothing to cut.
	out := run42(t, ctx, tool, `{}`, mode42+"=echo", "CLITOOL42_TEXT="+strings.Repeat("SECRET", 200))
	if len(out.Output) != 600 || len(warnings42(out)) != 0 {
		t.Errorf("1200 bytes redacted to 600 under 1000: output %d bytes, warnings %q; want 600, none (the cut counted on the redacted text)", len(out.Output), warnings42(out))
	}
	tool.CLI.MaxOutputBytes = 0
	out = run42(t, ctx, tool, `{}`, mode42+"=spew", "CLITOOL42_OUT=5000")
	if len(out.Output) != 5000 || len(warnings42(out)) != 0 {
		t.Errorf("max_output_bytes 0 (the default, 1 MiB), 5000 bytes: output %d bytes, warnings %q; want all of it", len(out.Output), warnings42(out))
	}
}

// TestMutation42CutCaptureNeverShowsAnEcho: a long secret echoed again and
// again past the capture (max_output_bytes + redactSlack): redaction
// shortens the whole echoes, and the capture ends inside one, whose
// beginning the redactor cannot recognise; no byte of it is returned, on
// stdout or in stderr's lines.
func TestMutation42CutCaptureNeverShowsAnEcho(t *testing.T) {
	secret := "SECRET" + strings.Repeat("x", 9994) // 10000 bytes
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[r]") }
	raw := []byte(strings.Repeat(secret, 7)[:1000+redactSlack]) // as captured
	for _, stream := range []string{"stdout", "stderr"} {
		got, _ := redactThenCut(redact, raw, true, 1000)
		if strings.Contains(got, "SECRET") {
			t.Errorf("%s: a cut capture returned %d bytes holding the echo's beginning", stream, len(got))
		}
	}
	// Through Run: the program's stdout and stderr each echo it 10 times.
	tool := tool42(t, "")
	tool.CLI.MaxOutputBytes = 1000
	inv, err := Spec(tool.CLI).ParseJSON([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Run(ctx42(t), Call{Tool: tool, Cmd: inv, Env: []string{mode42 + "=echo", "CLITOOL42_TEXT=" + strings.Repeat(secret, 10)}, Redact: redact})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Output, "xxxx") {
		t.Errorf("stdout: %d bytes returned holding a cut echo's beginning %q", len(out.Output), out.Output[:min(40, len(out.Output))])
	}
	for _, l := range out.Logs {
		if strings.Contains(l.Message, "xxxx") {
			t.Errorf("stderr line of %d bytes holding a cut echo's beginning (%s)", len(l.Message), l.Message[:min(40, len(l.Message))])
		}
	}
}

// TestMutation42SlackIsDropped: a capture cut inside the output returns
// the redacted text less its last redactSlack bytes, not one more.
func TestMutation42SlackIsDropped(t *testing.T) {
	raw := []byte("SECRET" + strings.Repeat("o", 500+redactSlack))
	got, cut := redactThenCut(func(s string) string { return strings.ReplaceAll(s, "SECRET", "") }, raw, true, 1000)
	if len(got) != 500 || cut != redactSlack {
		t.Errorf("a cut capture of %d bytes redacted to %d: %d bytes returned, %d cut; want 500, %d", len(raw), 500+redactSlack, len(got), cut, redactSlack)
	}
}

// TestMutation42StreamsRedacted: what reaches the caller of a program's
// stdout, its stderr lines and the failure's last line is redacted.
func TestMutation42StreamsRedacted(t *testing.T) {
	tool, ctx := tool42(t, ""), ctx42(t)
	for _, exit := range []string{"0", "3"} {
		out := run42(t, ctx, tool, `{}`, mode42+"=echo", "CLITOOL42_TEXT=first SECRET\nmiddle\nlast SECRET", "CLITOOL42_EXIT="+exit)
		all := out.Output
		for _, l := range out.Logs {
			all += "\n" + l.Message
		}
		if out.Failure != nil {
			all += "\n" + out.Failure.Message
		}
		if strings.Contains(all, "SECRET") {
			t.Errorf("exit %s: output, logs and failure %q; want SECRET redacted everywhere", exit, all)
		}
		if exit == "3" && (out.Failure == nil || out.Failure.Kind != api.KindTool || out.Failure.Message != "t exited with status 3: last [r]") {
			t.Errorf("exit 3: failure %+v; want a tool failure: t exited with status 3: last [r]", out.Failure)
		}
	}
}

// TestMutation42StdinWhole: the call's stdin reaches the program whole,
// one byte too.
func TestMutation42StdinWhole(t *testing.T) {
	tool := tool42(t, `{"maiden_command":1,"name":"t","stdin":{"media_type":"text/plain"}}`)
	for _, in := range []string{"x", "hello"} {
		out := run42(t, ctx42(t), tool, `{"stdin":"`+in+`"}`, mode42+"=stdin")
		if want := strconv.Quote(in); out.Output != want {
			t.Errorf("stdin %q: the program read %s; want %s", in, out.Output, want)
		}
	}
}

// TestMutation42NoNetNSSaid: a run with the proxy's port says it had no
// network namespace exactly when it had none (the program's own namespace
// tells); a run without the network never says so.
func TestMutation42NoNetNSSaid(t *testing.T) {
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Skip(err)
	}
	tool, ctx := tool42(t, ""), ctx42(t)
	inv, err := Spec(tool.CLI).ParseJSON([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, port := range []int{0, 9} {
		out, err := Run(ctx, Call{Tool: tool, Cmd: inv, Env: []string{mode42 + "=netns"}, ProxyPort: port})
		if err != nil || out.Failure != nil || strings.HasPrefix(out.Output, "refused") {
			t.Fatalf("port %d: %q %+v %v", port, out.Output, out.Failure, err)
		}
		sameNS := out.Output == own
		want := port != 0 && sameNS
		said := slices.ContainsFunc(warnings42(out), func(w string) bool { return strings.HasPrefix(w, "no network namespace") })
		if out.NoNetNS != want || said != want {
			t.Errorf("proxy port %d, the program in this process's network namespace: %v; NoNetNS %v, warned %v; want %v", port, sameNS, out.NoNetNS, said, want)
		}
	}
}

// TestMutation42DigestBindsPathAndCommand: the tool digest an approval or
// always-card is bound to changes with the program's path and with its
// command description.
func TestMutation42DigestBindsPathAndCommand(t *testing.T) {
	a := tool42(t, `{"maiden_command":1,"name":"t","options":[{"name":"x"}]}`)
	b := a
	b.Path = "/bin/other"
	c := tool42(t, `{"maiden_command":1,"name":"t","options":[{"name":"y"}]}`)
	_, _, da := Describe(a)
	_, _, db := Describe(b)
	_, _, dc := Describe(c)
	if da == db || da == dc {
		t.Errorf("digests: %s (a), %s (another path), %s (another command); want all different", da, db, dc)
	}
}

// TestMutation42FallbackOnlyFromAgentToml: an option's env fallback is read
// from this process's environment only when agent.toml's env names the
// variable (bare); a variable it does not name is never read, even when
// the CLI names others.
func TestMutation42FallbackOnlyFromAgentToml(t *testing.T) {
	spec, err := command.Load([]byte(`{"maiden_command":1,"name":"t","options":[{"name":"token","env":"T_TOKEN"},{"name":"user","env":"T_USER"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("T_TOKEN", "from-host")
	t.Setenv("T_USER", "host-user")
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"T_USER=u"}, "--user=u"},         // T_TOKEN not named: not read
		{[]string{"T_TOKEN"}, "--token=from-host"}, // named bare: this process's value
		{[]string{"OTHER=1"}, ""},
	} {
		inv, err := Spec(&config.CLI{Command: spec, Env: tc.env}).ParseJSON([]byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := inv.String(); got != tc.want {
			t.Errorf("env %q: rendering %q; want %q", tc.env, got, tc.want)
		}
	}
}

// TestMutation42MemoryIsTheTools: the tool's memory limit (RLIMIT_DATA) is
// the one the program runs under, below the default and above it.
func TestMutation42MemoryIsTheTools(t *testing.T) {
	tool, ctx := tool42(t, ""), ctx42(t)
	for _, tc := range []struct {
		limit, mb uint64
		want      string
	}{
		{512 << 20, 768, "refused: cannot allocate memory"},
		{2 << 30, 1536, "ok"}, // over the default (1 GiB): the tool's own
	} {
		tool.MemoryBytes = tc.limit
		out := run42(t, ctx, tool, `{}`, mode42+"=mmap", "CLITOOL42_MB="+strconv.FormatUint(tc.mb, 10))
		if out.Output != tc.want {
			t.Errorf("%d MiB under the tool's %d MiB: %q, %+v; want %q", tc.mb, tc.limit>>20, out.Output, out.Failure, tc.want)
		}
	}
}

// TestMutation42KilledBySignal: a program killed by a signal is a trap
// that names it, not an exit status.
func TestMutation42KilledBySignal(t *testing.T) {
	out := run42(t, ctx42(t), tool42(t, ""), `{}`, mode42+"=kill-self")
	if out.Failure == nil || out.Failure.Kind != api.KindTrap || out.Failure.Message != "t was killed by SIGKILL" {
		t.Fatalf("failure %+v; want a trap: t was killed by SIGKILL", out.Failure)
	}
}

// TestMutation42FailureTailBounded: a failure's message carries stderr's
// last line, cut at 512 bytes.
func TestMutation42FailureTailBounded(t *testing.T) {
	out := run42(t, ctx42(t), tool42(t, ""), `{}`, mode42+"=echo", "CLITOOL42_TEXT=first\n"+strings.Repeat("y", 600), "CLITOOL42_EXIT=3")
	if want := "t exited with status 3: " + strings.Repeat("y", 512) + "..."; out.Failure == nil || out.Failure.Message != want {
		t.Fatalf("failure %+v; want the last line cut at 512 bytes (%d bytes)", out.Failure, len(want))
	}
}
