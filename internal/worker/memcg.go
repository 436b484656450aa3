package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// A worker's memory cgroup (cgroup v1's memory controller) bounds what
// RLIMIT_DATA does not see: page tables (a 64 GiB read-only mapping,
// touched once per 2 MiB, is 128 MiB of them and no data at all), thread
// stacks, other kernel memory, and anything else the worker makes
// resident. Each worker gets its own cgroup, <maiden's memory
// cgroup>/maiden-<maiden's pid>/w<worker's pid>, joined by the parent right
// after the start (before the worker is sent any code); before each call
// the parent sets its limit to what it holds now plus the call's
// headroom (memory_mb, the allowance, and memcgSlack), and an excess is
// the kernel's OOM kill of the worker alone, reported as the memory kind.
// Without root, or on cgroup v2 (where maiden's own cgroup could not have
// child cgroups while it holds processes), there is no cgroup and the
// rlimits are the only bound.

// memcgSlack is the kernel memory (page tables of the linear memories and
// code a call maps, stacks, socket buffers) a call may charge beyond its
// data headroom.
const memcgSlack = 64 << 20

var memcgRoot = sync.OnceValues(func() (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("not root")
	}
	mount, err := memcgMount()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	own := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && f[1] != "" && strings.Contains(","+f[1]+",", ",memory,") {
			own = f[2]
		}
	}
	if own == "" {
		return "", errors.New("no cgroup v1 memory controller in /proc/self/cgroup")
	}
	sweepMemcgs(filepath.Join(mount, own))
	dir := filepath.Join(mount, own, "maiden-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	_ = os.Remove(dir) // made again by the first worker (joinMemcg)
	return dir, nil
})

// sweepMemcgs removes the empty cgroups of maidens that are gone (a
// process that exits right after shutting its pool down leaves its
// workers' cgroups behind: they are removed when each is reaped).
func sweepMemcgs(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), "maiden-")
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // that maiden runs
		}
		dir := filepath.Join(parent, e.Name())
		ws, _ := os.ReadDir(dir)
		for _, w := range ws {
			if strings.HasPrefix(w.Name(), "w") && w.IsDir() {
				_ = os.Remove(filepath.Join(dir, w.Name()))
			}
		}
		_ = os.Remove(dir)
	}
}

// memcgMount finds where the cgroup v1 memory controller is mounted.
func memcgMount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ... mount-point ... - fstype source super-options
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 3 && qf[0] == "cgroup" && strings.Contains(","+qf[2]+",", ",memory,") {
			return pf[4], nil
		}
	}
	return "", errors.New("no cgroup v1 memory controller mounted")
}

// memcg is a worker's memory cgroup: its directory, and its usage and
// limit files held open.
type memcg struct {
	dir   string
	usage *os.File
	pread *filePread // usage's, in one pread(2)
	limit *os.File
	set   uint64 // the limit last written (0: none)
}

// memcgTolerance is how far above the wanted limit the one in force may be
// and still stand: a worker's usage at rest moves by a few pages between
// calls, and an unchanged limit costs one read instead of a read and a
// write (the write is the dear part: ~45 µs here).
const memcgTolerance = 4 << 20

// joinMemcg puts a just-started worker in a memory cgroup of its own, with
// no limit yet; nil if there is none to be had.
func joinMemcg(pid int) *memcg {
	root, err := memcgRoot()
	if err != nil {
		return nil
	}
	dir := filepath.Join(root, "w"+strconv.Itoa(pid))
	// The last worker to leave removes maiden's directory (leave), so it
	// may be gone; one retry covers a removal between the two.
	for i := 0; ; i++ {
		if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil
		}
		err := os.Mkdir(dir, 0o700)
		if err == nil {
			break
		}
		if i == 1 || !errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	m, err := openMemcg(dir)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
	}
	if err != nil {
		m.leave()
		return nil
	}
	return m
}

func openMemcg(dir string) (*memcg, error) {
	m := &memcg{dir: dir}
	var err error
	if m.usage, err = os.Open(filepath.Join(dir, "memory.usage_in_bytes")); err != nil {
		return m, err
	}
	if m.pread, err = newFilePread(m.usage); err != nil {
		return m, err
	}
	m.limit, err = os.OpenFile(filepath.Join(dir, "memory.limit_in_bytes"), os.O_WRONLY, 0)
	return m, err
}

// leave removes an exited worker's cgroup, and maiden's directory if it
// was the last.
func (m *memcg) leave() {
	if m.usage != nil {
		m.usage.Close()
	}
	if m.limit != nil {
		m.limit.Close()
	}
	_ = os.Remove(m.dir)
	_ = os.Remove(filepath.Dir(m.dir)) // fails while other workers are there
}

// setLimit bounds the worker's charged memory to what it holds now plus
// headroom and memcgSlack (math.MaxUint64: no limit, while the parent
// loads code).
//
// The usage is read at every call, on the call's path (one pread(2) of the
// cgroup file, filePread: ~1.5 µs hot, 2–3 µs in a call's profile here,
// the largest single cost of the parent's side of a tiny call after the
// socket; os.File.ReadAt made it two, reading on to the end). It
// stays there because nothing cheaper says the same thing. A usage read
// earlier (when the worker went idle, every N calls, or while younger than
// some age) is too high by whatever the worker let go since, and the next
// call would get that on top of its headroom:
// TestMemcgLimitFollowsUsageAtEachCall holds this (with the read moved to
// the previous call, 44 MiB over after the worker let 48 MiB go). cgroup
// v1's usage thresholds (cgroup.event_control) could tell that the usage
// moved without a read, but the kernel checks them only every 128 page
// events per CPU, does not count charges batched per CPU (64 pages), and
// never for kernel memory (page tables, the very thing this cgroup is
// for), so a worker could free page tables unseen.

func (m *memcg) setLimit(headroom uint64) error {
	v := "-1"
	want := uint64(math.MaxUint64)
	if headroom != math.MaxUint64 {
		var buf [32]byte
		n, err := m.pread.read(buf[:])
		if n == 0 {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read %s: %w", m.usage.Name(), err)
		}
		used, err := strconv.ParseUint(string(bytes.TrimSpace(buf[:n])), 10, 64)
		if err != nil {
			return err
		}
		want = used + headroom + memcgSlack
		if m.set != 0 && m.set != math.MaxUint64 && m.set >= want && m.set-want <= memcgTolerance {
			return nil
		}
		v = strconv.FormatUint(want, 10)
	} else if m.set == want {
		return nil
	}
	if _, err := m.limit.WriteAt([]byte(v), 0); err != nil {
		return err
	}
	m.set = want
	return nil
}

// oomKilled tells whether the kernel killed a task of the cgroup for
// exceeding its limit.
func (m *memcg) oomKilled() bool {
	b, err := os.ReadFile(filepath.Join(m.dir, "memory.oom_control"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n > 0
		}
	}
	return false
}
