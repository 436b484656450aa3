//go:build unix

package store

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"os"
	"sync"
	"syscall"
)

// shmWatch reads the change counter SQLite keeps in shared memory, so that
// Generation (on every call's path, to decide whether a cached wallet is
// still the store's answer) costs a memory read instead of a query.
//
// The WAL index (the "-shm" file beside the database, SQLite file format
// §4.5) starts with a 48-byte header written twice in native byte order;
// its iChange field (offset 8) is incremented by every write transaction of
// every process (wal.c, walIndexWriteHdr), and isInit (offset 12) is set
// once the index is valid. A writer stores the second copy, then the first;
// a reader that finds the copies unequal caught a write in progress (this
// is how SQLite's own readers check, walIndexTryHdr).
//
// The file stays valid while any connection has the database open: SQLite
// rebuilds or truncates it only under an exclusive lock that no process
// can take while another holds the database open, and deletes it only when
// the last connection closes. The store keeps one connection open for as
// long as it is open (SQLite.pin) for that reason.
//
// The -shm file is opened once per process and inode and never closed:
// closing any descriptor of a file drops every POSIX lock the process holds
// on it, SQLite's own included, which would let another process rebuild the
// index under this one's connections (a test caught exactly that). The
// cost is one descriptor and one page mapping per store file a process
// opens.
type shmWatch struct {
	m []byte
	// f is kept reachable for the life of the process: an unreachable
	// *os.File is closed by its finalizer at some garbage collection,
	// which drops the process's POSIX locks exactly as an explicit Close
	// would (TestConcurrentWriters failed with SQLITE_IOERR_IN_PAGE, a
	// fault on the -shm mapping another process had truncated, once more
	// allocation made the collection come sooner).
	f *os.File
}

var shmFiles = struct {
	sync.Mutex
	byInode map[[2]uint64]*shmWatch
	kept    []*os.File // every -shm descriptor opened, reachable forever
}{byInode: map[[2]uint64]*shmWatch{}}

const walIndexHdrSize = 48

func openShm(dbPath string) (*shmWatch, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dbPath+"-shm", &st); err != nil { // stat(2): no descriptor to close
		return nil, err
	}
	if st.Size < 2*walIndexHdrSize {
		return nil, fmt.Errorf("%s-shm is %d bytes, shorter than the WAL-index header", dbPath, st.Size)
	}
	key := [2]uint64{uint64(st.Dev), uint64(st.Ino)}
	shmFiles.Lock()
	defer shmFiles.Unlock()
	if w, ok := shmFiles.byInode[key]; ok {
		return w, nil
	}
	f, err := os.Open(dbPath + "-shm")
	if err != nil {
		return nil, err
	}
	// f is deliberately never closed (see shmWatch), nor left to its
	// finalizer on the error paths below.
	shmFiles.kept = append(shmFiles.kept, f)
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if s, ok := fi.Sys().(*syscall.Stat_t); !ok || s.Ino != st.Ino || uint64(s.Dev) != uint64(st.Dev) {
		return nil, fmt.Errorf("%s-shm changed while it was opened", dbPath)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 2*walIndexHdrSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	w := &shmWatch{m: m, f: f}
	shmFiles.byInode[key] = w
	return w, nil
}

// version returns a hash of the whole header, or false when the header is
// not initialised or was being written (the caller then asks the
// database). Not iChange alone: a recovery of the index (after a writer was
// killed, say) rebuilds the header and may restart that counter at a value
// seen before, which would make a cache keyed on it keep a stale answer.
// The whole header (frame count, salts that change at every WAL restart,
// the last frame's checksum, iChange) identifies the WAL's content: two
// equal headers mean the same committed state.
func (w *shmWatch) version() (uint64, bool) {
	var h0, h1 [walIndexHdrSize]byte
	copy(h0[:], w.m[:walIndexHdrSize])
	copy(h1[:], w.m[walIndexHdrSize:2*walIndexHdrSize])
	if !bytes.Equal(h0[:], h1[:]) || h0[12] == 0 {
		return 0, false
	}
	h := fnv.New64a()
	h.Write(h0[:])
	return h.Sum64(), true
}

// close does nothing: the mapping and its descriptor live as long as the
// process (see shmWatch).
func (w *shmWatch) close() {}
