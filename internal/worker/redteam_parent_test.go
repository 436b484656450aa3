package worker

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"golang.org/x/sys/unix"
)

// More compromised workers, against the parent's side of the protocol. As
// in redteam_test.go, an init function serves argv[1] "parent-*" in a
// re-executed test binary before TestMain sees it.
func init() {
	if IsChild() && len(os.Args) > 1 && strings.HasPrefix(os.Args[1], "parent-") {
		os.Exit(parentRedteamWorker(os.Args[1]))
	}
}

// readaheadFrame is the size of each frame the read-ahead worker floods
// with (under a fetch frame's 64 MiB limit); it writes at most
// readaheadFrames of them, saying on stderr how many it wrote whole.
const (
	readaheadFrame  = 8 << 20
	readaheadFrames = 40
)

// hoard is what the hoarding worker maps while it loads code.
const hoard = 4 << 30

func parentRedteamWorker(mode string) int {
	conn := os.NewFile(ipcFD, "ipc")
	r := bufio.NewReader(conn)
	write := func(b []byte) { _, _ = conn.Write(b) }
	region := childMailboxes()
	write(hello{Version: protocolVersion, Fingerprint: "parent-redteam", Confinement: "none"}.encode())
	for {
		typ, p, err := readFrame(r, maxFrame)
		if err != nil {
			return 0
		}
		switch typ {
		case msgLoad:
			m, _ := decodeLoad(p)
			if mode == "parent-hoard-at-load" {
				// Loading, the parent's code or not: take memory,
				// while no call's limit holds, and keep it.
				if _, err := unix.Mmap(-1, 0, hoard, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE); err != nil {
					fmt.Fprintln(os.Stderr, "hoard refused:", err)
				}
			}
			takeCode(m)
			write(loadedMsg{Digest: m.Digest}.encode())
		case msgRun:
			m, _ := decodeRun(p)
			switch mode {
			case "parent-forge-next-now":
				// The answer, and in the same write the answer to the
				// call after this one, which nobody has asked for yet.
				write(append(doneMsg{ID: m.ID, Output: `"ok"`}.encode(), doneMsg{ID: m.ID + 1, Output: `"forged"`}.encode()...))
				<-make(chan struct{}) // and nothing more
			case "parent-forge-next-later":
				// The answer; then, idle, the next call's.
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				time.Sleep(20 * time.Millisecond)
				write(doneMsg{ID: m.ID + 1, Output: `"forged"`}.encode())
				<-make(chan struct{})
			case "parent-forge-next-slot":
				// The answer; then, idle, a frame in the mailbox's slot.
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
				time.Sleep(20 * time.Millisecond)
				toP := mailboxAt(region, toParent)
				f := doneMsg{ID: m.ID + 1, Output: `"forged"`}.encode()
				copy(toP.slot, f)
				toP.n.Store(uint32(len(f)))
				toP.state.Store(mbFull)
				<-make(chan struct{})
			case "parent-readahead":
				// Deaf to the parent (its frames wait for the slot
				// forever), a fetch whose reply then cannot be
				// written, and frames of the fetch's size for as long
				// as the parent reads them.
				mailboxAt(region, toWorker).state.Store(mbReading)
				write(fetchMsg{ID: m.ID, Method: "GET", URL: "https://example.com/"}.encode())
				big := make([]byte, readaheadFrame)
				binary.BigEndian.PutUint32(big, readaheadFrame-4)
				big[4] = msgFetch
				for i := range readaheadFrames {
					write(big)
					fmt.Fprintf(os.Stderr, "readahead %d\n", i+1)
				}
				<-make(chan struct{})
			default:
				write(doneMsg{ID: m.ID, Output: `"ok"`}.encode())
			}
		}
	}
}

// TestRedTeamPreopenWorkerThatSpokeIsNotReused: a worker started for a
// call's preopened directories is kept for the next call with the same
// ones, like a pool worker, and the same rule holds: a worker that sent
// anything after its answer (read with it, still in the socket, or in the
// mailbox's slot) is not given another call. Here it sends the next call's
// answer before the call exists; a reused worker would have the parent
// take it for that call's answer.
func TestRedTeamPreopenWorkerThatSpokeIsNotReused(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"parent-forge-next-now", "parent-forge-next-later", "parent-forge-next-slot"} {
		t.Run(strings.TrimPrefix(mode, "parent-forge-next-"), func(t *testing.T) {
			p := fakePool(t, mode, 1)
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c := sandbox.Call{Limits: fastLim, Input: "{}", Preopens: []sandbox.Preopen{{HostPath: dir, GuestPath: "/data"}}}
			out, err := p.run(context.Background(), "fake", "execute", c)
			if err != nil || out.Failure != nil || out.Output != `"ok"` {
				t.Fatalf("first call: %+v %v", out, err)
			}
			var w *proc
			p.preMu.Lock()
			if len(p.preIdle) == 1 {
				w = p.preIdle[0].w
			}
			p.preMu.Unlock()
			if w != nil {
				// It speaks while idle.
				bound := time.Now().Add(testkit.Slack(t, 5*time.Second))
				for !w.gone() && !w.pending() && time.Now().Before(bound) {
					time.Sleep(time.Millisecond)
				}
			}
			out, err = p.run(context.Background(), "fake", "execute", c)
			if err != nil || out.Failure != nil || out.Output != `"ok"` {
				t.Fatalf("second call: %+v %v, want ok from a fresh worker", out, err)
			}
			if w != nil && w.killReason() == notKilled {
				t.Fatalf("the worker (pid %d) that spoke after its answer served the next call", w.pid)
			}
		})
	}
}

// TestRedTeamReadAheadIsBounded: while a call's loop waits to write to its
// worker (a fetch's reply, here; a reveal's or a cancel's likewise), the
// parent does not go on reading the worker's frames into memory: each is
// bounded by its type's limit before its body is allocated (a fetch's is
// 64 MiB), and a worker that stops reading holds the loop until the call's
// deadline. Frames read ahead of the loop multiply the limit; here the
// worker counts those the parent took whole.
func TestRedTeamReadAheadIsBounded(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "parent-readahead", 1)
	l := sandbox.Limits{Timeout: 2 * time.Second, Memory: 16 << 20}
	done := runInBackground(context.Background(), p, "fake", sandbox.Call{Limits: l, Input: "{}"})
	var w *proc
	waitUntil(t, "the worker is busy", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for b := range p.busy {
			w = b
		}
		return w != nil
	})
	r := awaitRun(t, done, 10*time.Second, "the call was held past its deadline")
	select {
	case <-w.exited: // its stderr read to the end
	case <-time.After(testkit.Slack(t, 5*time.Second)):
		t.Fatal("the worker was not stopped")
	}
	n := 0
	for _, line := range strings.Split(w.stderr.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "readahead "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	const most = 2 // the frame the loop holds, and the one being handed to it
	if n > most {
		t.Errorf("the parent read %d frames of %d MiB (%d MiB) ahead of a call loop waiting to write to the worker, want at most %d",
			n, readaheadFrame>>20, int(n)*readaheadFrame>>20, most)
	}
	if r.err != nil || r.out.Failure == nil || r.out.Failure.Kind != sandbox.KindDeadline {
		t.Errorf("%+v %v, want a deadline failure", r.out, r.err)
	}
	t.Logf("frames read whole: %d", n)
}

// TestRedTeamLoadIsBounded: a worker being handed compiled code (any
// worker may be: a call of a code it does not hold loads it first, and a
// worker taken over by an earlier call serves later ones) is not free of
// every memory limit meanwhile: what it took while loading would otherwise
// be measured as its new resting size, over which each later call's limit
// is set, and kept for good.
func TestRedTeamLoadIsBounded(t *testing.T) {
	t.Parallel()
	p := fakePool(t, "parent-hoard-at-load", 1)
	out, err := p.run(context.Background(), "fake", "execute", sandbox.Call{Limits: fastLim, Input: "{}"})
	if err != nil || out.Failure != nil || out.Output != `"ok"` {
		t.Fatalf("call: %+v %v", out, err)
	}
	p.mu.Lock()
	if len(p.idle) != 1 {
		p.mu.Unlock()
		t.Fatalf("%d idle workers, want 1", len(p.idle))
	}
	w := p.idle[0]
	p.mu.Unlock()
	held, err := vmData(w.pid)
	if err != nil {
		t.Fatal(err)
	}
	if held >= hoard {
		t.Fatalf("the worker holds %d MiB of data (VmData) after loading 8 bytes of code, and serves on with a limit over it (%d MiB)",
			held>>20, w.limit>>20)
	}
	t.Logf("VmData %d MiB; %s", held>>20, strings.TrimSpace(w.stderr.String()))
}
