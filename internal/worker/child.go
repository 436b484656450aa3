package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// envWorker marks a process started as a worker; its value is the protocol
// version. The confinement in confine_linux.c reads it before the Go
// runtime starts any thread.
const envWorker = "MAIDEN_WORKER"

// ipcFD is the worker's end of the socket to its parent.
const ipcFD = 3

// IsChild reports whether this process was started as a maiden worker.
func IsChild() bool { return os.Getenv(envWorker) != "" }

// Main serves as a worker and exits if this process was started as one;
// otherwise it returns at once. A program that runs workers (the maiden
// command, an embedder that chose worker isolation, a test binary) calls it
// first thing in main or TestMain.
func Main() {
	if !IsChild() {
		return
	}
	// The socket stays blocking: the worker sleeps in read(2) on the
	// thread that serves the next call, not in Go's network poller
	// (spinReader says why).
	os.Exit(serve(os.NewFile(ipcFD, "maiden-ipc")))
}

// child is the worker side of the protocol.
type child struct {
	conn io.ReadWriter
	spin *spinReader
	sb   *sandbox.Sandbox
	wmu  sync.Mutex
	// out is the worker's mailbox to the parent (mailbox.go), nil without
	// the shared region; send uses it under wmu.
	out *mailbox

	// preopens are the directories this worker was started with (a
	// one-call worker: see preopen.go); every call gets them.
	preopens []sandbox.OpenedPreopen

	// codeFD is the worker's end of its code channel (codefd.go); -1
	// without one.
	codeFD int

	// rd is what the parent's frames are read from, by one goroutine at a
	// time (loop).
	rd *bufio.Reader
	// reader is the state of a goroutine reading the parent's frames
	// while a call runs (readerIdle, readerArmed, readerStarted: serveRun,
	// startReader); cancelSignal says that the parent's wake-up signal
	// came while no call was armed, for the next call to see (cancel.go).
	reader       atomic.Int32
	cancelSignal atomic.Bool

	mu    sync.Mutex
	comps map[string]*sandbox.Compiled
	run   *childRun // the call in progress, if any

	// exit receives why the reading of the socket ended (io.EOF: the
	// parent closed it).
	exit chan error
}

type childRun struct {
	m       runMsg
	ctx     context.Context
	id      uint64
	cancel  context.CancelFunc
	replies chan fetchReplyMsg
	reveals chan revealReplyMsg
}

func serve(conn *os.File) int {
	if conn == nil {
		fmt.Fprintln(os.Stderr, "maiden worker: no IPC socket on fd 3")
		return 2
	}
	if msg := confinementError(); msg != "" {
		// Refuse to run guest code unconfined when confinement was asked
		// for and failed; the parent sees the message on stderr.
		fmt.Fprintln(os.Stderr, "maiden worker: confinement failed:", msg)
		return 3
	}
	preopens, err := childPreopens()
	if err != nil {
		fmt.Fprintln(os.Stderr, "maiden worker:", err)
		return 2
	}
	sb, err := sandbox.New(&sandbox.Options{CacheDir: "off"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "maiden worker:", err)
		return 2
	}
	c := &child{conn: conn, spin: newSpinReader(conn), sb: sb, comps: map[string]*sandbox.Compiled{}, preopens: preopens, codeFD: childCodeFD()}
	if region := childMailboxes(); region != nil {
		c.spin.useMailbox(mailboxAt(region, toWorker))
		c.out = mailboxAt(region, toParent)
		mailboxReady(region).Store(1)
	}
	c.reader.Store(readerIdle)
	// Before the hello: no call, and so no cancel, can come earlier.
	c.watchCancelSignal()
	if err := c.send(hello{Version: protocolVersion, Fingerprint: sb.Engine().Fingerprint(), Confinement: confinementNote()}.encode()); err != nil {
		return 0
	}
	c.exit = make(chan error, 1)
	c.rd = bufio.NewReaderSize(c.spin, 64<<10)
	go c.loop(c.rd)
	err = <-c.exit
	if errors.Is(err, io.EOF) {
		// The parent closed the socket: it is done with this worker.
		return 0
	}
	fmt.Fprintln(os.Stderr, "maiden worker:", err)
	return 2
}

// load deserializes the compiled code of a load frame: its bytes, or the
// memfd the parent sent ahead of it over the code channel, mapped while
// wasmtime copies the code out.
func (c *child) load(m loadMsg) (*sandbox.Compiled, error) {
	if len(m.Code) > 0 {
		return c.sb.Deserialize(m.Code)
	}
	code, unmap, err := receiveCode(c.codeFD, m.Size)
	if err != nil {
		return nil, err
	}
	defer unmap()
	return c.sb.Deserialize(code)
}

func (c *child) send(frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.out != nil {
		return c.out.send(frame, c.writeSocket, waitSlot)
	}
	return c.writeSocket(frame)
}

func (c *child) writeSocket(frame []byte) error {
	_, err := c.conn.Write(frame)
	return err
}

// waitSlot waits while the parent's mailbox still holds this worker's last
// frame: the parent reads on until the call's answer, so it takes it soon.
func waitSlot(spins int) error {
	if spins >= 1<<12 {
		time.Sleep(20 * time.Microsecond)
	}
	return nil
}

// loop reads the parent's frames; the error that ends the reading goes to
// c.exit. A run frame is served on the goroutine that read it, at once:
// starting a goroutine for it had the Go scheduler wake an idle thread to
// take it and park one when it ended, two context switches per call that
// cost ~10 µs each on this kind of VM (issue 23; the worker made ~5 per
// call in all). Cancellations and fetch and reveal replies are read
// meanwhile by a goroutine started only when the parent signals a cancel
// (cancel.go) or the call asks the parent something (startReader); the
// reading then stays with that goroutine and this one ends. Only one
// goroutine reads at a time, so frames keep their order.
func (c *child) loop(rd *bufio.Reader) {
	for {
		r, err := c.readUntilRun(rd)
		if err != nil {
			c.exit <- err
			return
		}
		if !c.serveRun(rd, r) {
			return
		}
	}
}

// readUntilRun serves frames until a run frame, which it returns
// registered as the call in progress.
func (c *child) readUntilRun(rd *bufio.Reader) (*childRun, error) {
	for {
		typ, p, err := readFrame(rd, maxFrame)
		if err != nil {
			return nil, err
		}
		switch typ {
		case msgLoad:
			m, err := decodeLoad(p)
			if err != nil {
				return nil, err
			}
			reply := loadedMsg{Digest: m.Digest}
			comp, err := c.load(m)
			if err != nil {
				reply.Err = err.Error()
			} else {
				c.mu.Lock()
				if old := c.comps[m.Digest]; old != nil {
					old.Close()
				}
				c.comps[m.Digest] = comp
				c.mu.Unlock()
			}
			if err := c.send(reply.encode()); err != nil {
				return nil, err
			}
		case msgDrop:
			m, err := decodeDrop(p)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			if comp := c.comps[m.Digest]; comp != nil {
				comp.Close()
				delete(c.comps, m.Digest)
			}
			c.mu.Unlock()
		case msgCompile:
			m, err := decodeCompile(p)
			if err != nil {
				return nil, err
			}
			reply := compiledMsg{ID: m.ID}
			reply.Code, err = c.sb.Compile(m.Wasm)
			if err != nil {
				reply.Err = err.Error()
			}
			if err := c.send(reply.encode()); err != nil {
				return nil, err
			}
		case msgRun:
			m, err := decodeRun(p)
			if err != nil {
				return nil, err
			}
			return c.start(m)
		case msgCancel:
			m, err := decodeCancel(p)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			if c.run != nil && c.run.id == m.ID {
				c.run.cancel()
			}
			c.mu.Unlock()
		case msgFetchReply:
			m, err := decodeFetchReply(p)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			r := c.run
			c.mu.Unlock()
			if r != nil && r.id == m.ID {
				select {
				case r.replies <- m:
				default: // nobody asked: ignore
				}
			}
		case msgRevealReply:
			m, err := decodeRevealReply(p)
			if err != nil {
				return nil, err
			}
			c.mu.Lock()
			r := c.run
			c.mu.Unlock()
			if r != nil && r.id == m.ID {
				select {
				case r.reveals <- m:
				default: // nobody asked: ignore
				}
			}
		default:
			return nil, fmt.Errorf("unknown message type %d", typ)
		}
	}
}

// start registers the call of m as the one in progress.
func (c *child) start(m runMsg) (*childRun, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		return nil, errors.New("run while a call is in progress")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &childRun{m: m, ctx: ctx, id: m.ID, cancel: cancel, replies: make(chan fetchReplyMsg, 1), reveals: make(chan revealReplyMsg, 1)}
	c.run = r
	return r, nil
}

// serveRun runs the call r and reports whether this goroutine still reads
// the parent's frames (no other goroutine was started to read them during
// the call).
func (c *child) serveRun(rd *bufio.Reader, r *childRun) bool {
	if c.armReader() {
		go c.loop(rd)
	}
	m := r.m
	c.mu.Lock()
	comp := c.comps[m.Digest]
	c.mu.Unlock()
	done := c.execute(r.ctx, r, comp, m)
	r.cancel()
	reading := c.disarmReader()
	c.mu.Lock()
	c.run = nil
	c.mu.Unlock()
	_ = c.send(done.encode())
	// A busy server's next call comes soon: stay awake for it, if the
	// parent saw a CPU free for that (freecpu.go).
	if spin := min(time.Duration(nsDuration(m.SpinNS)), workerSpinWait); spin > 0 {
		c.spin.spinFor(spin)
	}
	return reading
}

func (c *child) execute(ctx context.Context, r *childRun, comp *sandbox.Compiled, m runMsg) doneMsg {
	done := doneMsg{ID: m.ID}
	if comp == nil {
		done.HostErr = "compiled code " + m.Digest + " is not loaded"
		return done
	}
	call := sandbox.Call{
		Limits: sandbox.Limits{Timeout: time.Duration(nsDuration(m.TimeoutNS)), Memory: m.Memory},
		Input:  m.Input,
		OnLog: func(e sandbox.LogEntry) {
			_ = c.send(logMsg{ID: m.ID, Level: string(e.Level), Source: e.Source, Message: e.Message}.encode())
		},
		Fetch: func(ctx context.Context, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
			return c.fetch(ctx, r, req)
		},
		Reveal: func(ctx context.Context, handle string) (string, error) {
			return c.reveal(ctx, r, handle)
		},
	}
	call.Opened = c.preopens
	out, err := c.sb.Run(ctx, comp, m.Export, call)
	// The truncation marker is not a notified line: pass it on.
	if n := len(out.Logs); n > 0 && out.Logs[n-1].Source == sandbox.SourceHost {
		e := out.Logs[n-1]
		_ = c.send(logMsg{ID: m.ID, Level: string(e.Level), Source: e.Source, Message: e.Message}.encode())
	}
	done.MemoryPeak = out.MemoryPeak
	switch {
	case err != nil && ctx.Err() != nil:
		done.Interrupted = true
	case err != nil:
		done.HostErr = err.Error()
	case out.Failure != nil:
		done.FailKind, done.FailMessage = string(out.Failure.Kind), out.Failure.Message
	default:
		done.Output = out.Output
	}
	return done
}

// fetch hands the tool's request to the parent, which holds the network
// and the secrets, and waits for its answer within the call's deadline.
func (c *child) fetch(ctx context.Context, r *childRun, req sandbox.FetchRequest) (*sandbox.FetchResponse, *sandbox.FetchError) {
	m := fetchMsg{ID: r.id, Method: req.Method, URL: req.URL, Body: req.Body, HasCredential: req.HasCredential, Credential: req.Credential}
	for _, h := range req.Headers {
		m.Headers = append(m.Headers, header{Name: h.Name, Value: h.Value})
	}
	c.startReader() // the answer comes as a frame: read them now
	if err := c.send(m.encode()); err != nil {
		return nil, &sandbox.FetchError{Kind: sandbox.FetchFailed, Message: "worker lost its parent"}
	}
	select {
	case rep := <-r.replies:
		if rep.ErrKind != "" {
			return nil, &sandbox.FetchError{Kind: sandbox.FetchErrorKind(rep.ErrKind), Message: rep.ErrMessage}
		}
		resp := &sandbox.FetchResponse{Status: int(rep.Status), Body: rep.Body}
		for _, h := range rep.Headers {
			resp.Headers = append(resp.Headers, sandbox.Header{Name: h.Name, Value: h.Value})
		}
		return resp, nil
	case <-ctx.Done():
		return nil, &sandbox.FetchError{Kind: sandbox.FetchTimeout}
	}
}

// reveal asks the parent, which alone holds the secrets and decides, for
// the value a handle stands for, and waits within the call's deadline. A
// string longer than any handle is refused here: the parent would take the
// frame for a protocol violation.
func (c *child) reveal(ctx context.Context, r *childRun, handle string) (string, error) {
	if len(handle) > maxHandleBytes {
		return "", fmt.Errorf("not a secret handle of this call (%d bytes; handles are much shorter)", len(handle))
	}
	c.startReader() // the answer comes as a frame: read them now
	if err := c.send(revealMsg{ID: r.id, Handle: handle}.encode()); err != nil {
		return "", errors.New("worker lost its parent")
	}
	select {
	case rep := <-r.reveals:
		if !rep.OK {
			return "", errors.New(rep.Refusal)
		}
		return rep.Value, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
