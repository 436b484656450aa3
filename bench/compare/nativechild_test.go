package compare

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The native-mcp-stdio-child-go row is the floor of "a tool in another
// process over MCP stdio" (maiden serve with workers): the native stdio
// server, whose tools relay each call to a long-lived child process (this
// test binary again, COMPARE_SERVE=native-child) over pipes and answer with
// what the child returned. The child runs the native tools' own work
// (echoWork, jsonWork), so the only difference from native-mcp-stdio-go is
// the hop.
//
// Concurrency: a pool of children, one per call in flight, as maiden has one
// worker per concurrent call. The pool holds as many children as the most
// goroutines a workload is measured with; a call waits for a free child.

// childPool is the number of children the relaying server starts: the
// largest goroutine count of any workload.
var childPool = slices.Max(slices.Concat(func() [][]int {
	var gs [][]int
	for _, w := range workloads {
		gs = append(gs, w.gs)
	}
	return gs
}()...))

// nativeChildStdioRow is a tools/call round trip to the relaying server
// over stdio. peak-rss-MiB is the server's (not its children's);
// children-cpu-us/call counts the children.
func nativeChildStdioRow(tb testing.TB, w *workload, g int) *run {
	s := shared(tb, "native-stdio-child", func() (stdioServer, func()) { return startNativeStdio(tb, "native-mcp-child") })
	return &run{ops: mcpOps(tb, s.cs, w, g), pid: s.pid}
}

// ---- framing: a 4-byte big-endian length, then that many bytes ----

// maxFrame is the largest frame either side writes or accepts.
const maxFrame = 1 << 20

// writeFrame writes p as one frame, in one Write.
func writeFrame(w io.Writer, p []byte) error {
	if len(p) > maxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", len(p), maxFrame)
	}
	buf := make([]byte, 4+len(p))
	binary.BigEndian.PutUint32(buf, uint32(len(p)))
	copy(buf[4:], p)
	_, err := w.Write(buf)
	return err
}

// readFrame reads one frame of at most limit bytes. It returns io.EOF only
// when r ends cleanly before a frame; a frame cut short is an error.
func readFrame(r io.Reader, limit int) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("truncated frame header: %w", err)
	}
	n := binary.BigEndian.Uint32(h[:])
	if uint64(n) > uint64(limit) {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", n, limit)
	}
	p := make([]byte, n)
	if got, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("truncated frame: %d of %d bytes: %w", got, n, err)
	}
	return p, nil
}

// A request frame is the tool's name, a zero byte, the arguments (raw
// JSON). A reply frame is 'o' and the output (raw JSON), or 'e' and an
// error message.
const (
	replyOK  = 'o'
	replyErr = 'e'
)

// ---- the child ----

// childWork is what the child runs per tool: the native tools' work, with
// the arguments decoded and the output encoded as the SDK does around them.
var childWork = map[string]func(args []byte) ([]byte, error){
	echoTool.Name: decoded(echoWork),
	jsonTool.Name: decoded(jsonWork),
}

func decoded[In, Out any](work func(In) Out) func([]byte) ([]byte, error) {
	return func(args []byte) ([]byte, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		return json.Marshal(work(in))
	}
}

// serveChild answers request frames from r with reply frames on w until r
// ends.
func serveChild(r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	for {
		req, err := readFrame(br, maxFrame)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name, args, _ := bytes.Cut(req, []byte{0})
		reply := []byte{replyErr}
		if work, ok := childWork[string(name)]; !ok {
			reply = fmt.Appendf(reply, "no tool %q", name)
		} else if out, err := work(args); err != nil {
			reply = append(reply, err.Error()...)
		} else {
			reply = append([]byte{replyOK}, out...)
		}
		if err := writeFrame(w, reply); err != nil {
			return err
		}
	}
}

// serveNativeChild is the child process: TestMain runs it for
// COMPARE_SERVE=native-child, on its stdin and stdout.
func serveNativeChild() int {
	if err := serveChild(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "native-child:", err)
		return 1
	}
	return 0
}

// ---- the relaying server ----

// child is one child process and its ends of the pipes.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// children is the relaying server's pool of children.
type children struct {
	all  []*child
	free chan *child
}

// startChildren starts n children, this test binary with
// COMPARE_SERVE=native-child, each on its own pair of pipes.
func startChildren(n int) (*children, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cs := &children{free: make(chan *child, n)}
	for range n {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), "COMPARE_SERVE=native-child")
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			cs.close()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			cs.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			cs.close()
			return nil, err
		}
		c := &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
		cs.all = append(cs.all, c)
		cs.free <- c
	}
	return cs, nil
}

// call sends tool name's arguments to a free child and returns its output.
func (cs *children) call(ctx context.Context, name string, args []byte) ([]byte, error) {
	var c *child
	select {
	case c = <-cs.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { cs.free <- c }()
	req := make([]byte, 0, len(name)+1+len(args))
	req = append(append(append(req, name...), 0), args...)
	if err := writeFrame(c.in, req); err != nil {
		return nil, fmt.Errorf("to the child: %w", err)
	}
	reply, err := readFrame(c.out, maxFrame)
	switch {
	case err == io.EOF:
		return nil, errors.New("the child closed its output")
	case err != nil:
		return nil, fmt.Errorf("from the child: %w", err)
	case len(reply) > 0 && reply[0] == replyOK:
		return reply[1:], nil
	case len(reply) > 0 && reply[0] == replyErr:
		return nil, errors.New(string(reply[1:]))
	}
	return nil, fmt.Errorf("from the child: a reply starting %q", trim(string(reply)))
}

// close closes every child's input, which ends it, and reaps it.
func (cs *children) close() error {
	var errs []error
	for _, c := range cs.all {
		c.in.Close()
		errs = append(errs, c.cmd.Wait())
	}
	return errors.Join(errs...)
}

// relayTool adds to s the native tool t whose calls go to a child. The
// arguments reach the child as they came (after the SDK's check against the
// input schema); the child's output is the result, checked against the
// output schema the SDK infers for Out, as for the native tool.
func relayTool[Out any](s *mcp.Server, t *mcp.Tool, cs *children) {
	out, err := jsonschema.ForType(reflect.TypeFor[Out](), &jsonschema.ForOptions{})
	if err != nil {
		panic(err)
	}
	tt := *t
	tt.OutputSchema = out
	mcp.AddTool(s, &tt, func(ctx context.Context, _ *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, json.RawMessage, error) {
		res, err := cs.call(ctx, t.Name, args)
		return nil, res, err
	})
}

// serveNativeChildStdio is the relaying server over stdio; TestMain runs it
// for COMPARE_SERVE=native-mcp-child. Its children end with it.
func serveNativeChildStdio() int {
	cs, err := startChildren(childPool)
	if err != nil {
		fmt.Fprintln(os.Stderr, "native-mcp-child:", err)
		return 1
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "native-child", Version: "0"}, nil)
	relayTool[echoIn](s, echoTool, cs)
	relayTool[string](s, jsonTool, cs)
	err = s.Run(context.Background(), &mcp.StdioTransport{})
	if cerr := cs.close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "native-mcp-child:", err)
		return 1
	}
	return 0
}

// ---- tests ----

func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	msgs := [][]byte{[]byte("echo\x00{}"), {}, bytes.Repeat([]byte("x"), maxFrame)}
	for _, m := range msgs {
		if err := writeFrame(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	whole := slices.Clone(buf.Bytes())
	for i, want := range msgs {
		got, err := readFrame(&buf, maxFrame)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, %v; want %d bytes", i, len(got), err, len(want))
		}
	}
	if _, err := readFrame(&buf, maxFrame); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}

	if err := writeFrame(&buf, make([]byte, maxFrame+1)); err == nil {
		t.Error("writeFrame wrote a frame over the limit")
	}
	for _, c := range []struct {
		name, want string
		in         []byte
		limit      int
	}{
		{"header cut short", "truncated frame header", whole[:3], maxFrame},
		{"payload cut short", "truncated frame: 5 of 7 bytes", whole[:4+5], maxFrame},
		{"over the limit", "frame of 7 bytes exceeds the 6-byte limit", whole, 6},
		{"length beyond any limit", "frame of 4294967295 bytes exceeds", []byte{0xff, 0xff, 0xff, 0xff, 'x'}, maxFrame},
	} {
		_, err := readFrame(bytes.NewReader(c.in), c.limit)
		if err == nil || err == io.EOF || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestFloorRowGoesThroughItsChild checks that the relaying server's answers
// come from its children: the kernel's count of bytes the children read and
// wrote (/proc/PID/io) must grow by at least the calls' inputs and outputs,
// which a server answering by itself cannot make happen. The written count
// is the decisive one: a child writes nothing but replies, whereas Go's
// runtime reads files of its own now and then (cgroup limits), which can
// make a few hundred bytes of reads without any call. Then the test checks
// that the children are gone once the server has exited.
func TestFloorRowGoesThroughItsChild(t *testing.T) {
	s, stop := startNativeStdio(t, "native-mcp-child")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	// connect has had the server's answer to initialize, which it gives
	// after starting its children.
	var kids []int
	for pid := range childStats(s.pid) {
		kids = append(kids, pid)
	}
	if len(kids) != childPool {
		t.Fatalf("the server has %d child processes, want %d", len(kids), childPool)
	}
	for _, w := range workloads {
		if !hasNative(w) {
			continue
		}
		before := childIO(t, kids)
		ops := mcpOps(t, s.cs, w, 2) // one call, checked
		const more = 100
		var wg sync.WaitGroup
		errs := make([]error, len(ops))
		for i, op := range ops { // both children in use, at times
			wg.Go(func() {
				for range more / len(ops) {
					if err := op(); err != nil {
						errs[i] = err
						return
					}
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		after := childIO(t, kids)
		calls := uint64(1 + more)
		t.Logf("%s: the children read %d and wrote %d bytes in %d calls", w.name, after.read-before.read, after.written-before.written, calls)
		// The SDK re-encodes the arguments before the handler sees them
		// (the json input's \u00e9 escapes become two bytes of UTF-8), so
		// the children read somewhat less than the input: half is the bound.
		if got, min := after.read-before.read, calls*uint64(len(w.input))/2; got < min {
			t.Errorf("%s: the children read %d bytes in %d calls of %d bytes of input (want at least %d): the answers did not come from them",
				w.name, got, calls, len(w.input), min)
		}
		if got, min := after.written-before.written, calls*uint64(len(w.want)); got < min {
			t.Errorf("%s: the children wrote %d bytes in %d calls of %d bytes of output (want at least %d): the answers did not come from them",
				w.name, got, calls, len(w.want), min)
		}
	}
	stop() // waits for the server to exit; it reaps its children first
	stopped = true
	for _, pid := range kids {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			t.Errorf("child %d outlived the server (kill 0: %v)", pid, err)
		}
	}
}

// ioCount is what /proc/PID/io says a process read and wrote through
// system calls (rchar, wchar), summed over processes.
type ioCount struct{ read, written uint64 }

func childIO(t *testing.T, pids []int) ioCount {
	t.Helper()
	var sum ioCount
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
			n, _ := strconv.ParseUint(v, 10, 64)
			switch k {
			case "rchar":
				sum.read += n
			case "wchar":
				sum.written += n
			}
		}
	}
	return sum
}
