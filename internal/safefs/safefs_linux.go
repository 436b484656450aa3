//go:build linux

package safefs

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// MaxPath is the longest path accepted (the boundary's limit, BOUNDARIES.md validation 5).
const MaxPath = 4096

// Root is one directory and everything beneath it, with what may be done there. Read and Write roots grant (their
// union: write covers read); NoWrite and Deny roots take away, whatever the grants say, and are checked both on the
// caller's path and on the path the kernel actually resolved (so a symlink into them does not get around them).
//
// Every root path is opened without following any symlink on the way (openat2 RESOLVE_NO_SYMLINKS, or the O_NOFOLLOW
// walk): a root whose path holds a symlink is refused (KindSymlink), rather than granting whatever the link points to.
type Root struct {
	Path   string
	Access Access
	// Exact (Read and Write roots only): the root grants Path itself and nothing beneath it, and Path may be a file.
	// Its last component is opened beneath its parent and never followed when it is a symlink (KindSymlink): an entry
	// naming /d/link grants the link's own path, not a sibling or directory it points to.
	Exact bool
}

// Option changes one call.
type Option func(*options)

type options struct {
	protected []string
	authorize func(string) error
}

// Authorize has every operation ask authorize before a byte is read, listed or written: it is given the path the
// kernel resolved (the file read, the directory listed, or a write's target: its parent as resolved plus its last
// component), beneath the root it was resolved under (roots hold no symlink, so that is the caller's own naming), so
// that it can decide on where a symlink beneath the root led, not only on the path asked. A non-nil error refuses the operation (KindRefused, wrapping it) and nothing is read or changed. When
// where it resolved cannot be told, the answer is a refusal without asking.
func Authorize(authorize func(resolved string) error) Option {
	return func(o *options) { o.authorize = authorize }
}

func optionsOf(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// ProtectNames makes a write refuse (KindProtected) a path with a component, beneath the root it was resolved under,
// named one of names (".git"): both as given and on the path the kernel actually resolved, so a symlink elsewhere
// (ws/g -> sub/.git) does not reach a protected directory at any depth. Reads and lists ignore it.
func ProtectNames(names ...string) Option {
	return func(o *options) { o.protected = append(o.protected, names...) }
}

// Access is what a Root allows or forbids beneath its path.
type Access int

// The accesses of a Root.
const (
	AccessRead    Access = iota // read and list
	AccessWrite                 // read, list, create and overwrite files
	AccessNoWrite               // protected (e.g. a workspace's .git): nothing beneath is writable
	AccessDeny                  // explicit deny: nothing beneath is read, listed or written
)

// Kind classifies an Error.
type Kind string

// The kinds of Error.
const (
	KindInvalidPath Kind = "invalid_path"   // not absolute or not normalised (BOUNDARIES.md validation 4)
	KindPathTooLong Kind = "path_too_long"  // over MaxPath bytes (BOUNDARIES.md validation 5)
	KindOutside     Kind = "outside"        // under no root
	KindReadOnly    Kind = "read_only"      // under a root, but none that allows writing
	KindDenied      Kind = "denied"         // beneath a Deny root (the path given, or where it resolved)
	KindProtected   Kind = "protected"      // a write beneath a NoWrite root (the path given, or where it resolved)
	KindNotFound    Kind = "not_found"      // no such file or directory
	KindTooLarge    Kind = "too_large"      // over the caller's byte limit
	KindIsDir       Kind = "is_directory"   // a directory where a file was needed
	KindNotDir      Kind = "not_directory"  // a file where a directory was needed
	KindNotRegular  Kind = "not_regular"    // a device, FIFO or socket
	KindEscape      Kind = "symlink_escape" // resolution (a symlink or "..") would leave the root
	KindSymlink     Kind = "symlink"        // a symlink that is not followed here: the last component of a write, a
	// /proc magic link, a loop, or any symlink under the openat fallback
	KindIO      Kind = "io"      // anything else the kernel said
	KindRefused Kind = "refused" // the caller's Authorize refused where the path resolved (Err is its error)
)

// Error is every error this package returns. Path is the caller's path; Root the root it was resolved under, if any.
type Error struct {
	Op   string // read, write, list
	Path string
	Root string
	Kind Kind
	Err  error // the underlying errno or detail, may be nil
}

func (e *Error) Error() string {
	msg := "safefs: " + e.Op + " " + e.Path + ": " + string(e.Kind)
	switch e.Kind {
	case KindOutside:
		msg += " (under no allowed root)"
	case KindReadOnly:
		msg += " (allowed roots covering it are read-only)"
	case KindDenied:
		msg += " (beneath an explicit deny)"
	case KindProtected:
		msg += " (beneath a protected path that is never writable)"
	case KindEscape:
		msg += " (resolves outside root " + e.Root + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotFound) and the like work: a sentinel matches any Error of its Kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Path == "" && t.Kind == e.Kind
}

// Sentinels for errors.Is.
var (
	ErrInvalidPath = &Error{Kind: KindInvalidPath}
	ErrPathTooLong = &Error{Kind: KindPathTooLong}
	ErrOutside     = &Error{Kind: KindOutside}
	ErrReadOnly    = &Error{Kind: KindReadOnly}
	ErrDenied      = &Error{Kind: KindDenied}
	ErrProtected   = &Error{Kind: KindProtected}
	ErrNotFound    = &Error{Kind: KindNotFound}
	ErrTooLarge    = &Error{Kind: KindTooLarge}
	ErrIsDir       = &Error{Kind: KindIsDir}
	ErrNotDir      = &Error{Kind: KindNotDir}
	ErrNotRegular  = &Error{Kind: KindNotRegular}
	ErrEscape      = &Error{Kind: KindEscape}
	ErrSymlink     = &Error{Kind: KindSymlink}
	ErrRefused     = &Error{Kind: KindRefused}
)

// Content is what Read returns: the file as text when it is valid UTF-8 without NUL bytes, else base64.
type Content struct {
	Data   string // the text, or the base64 (standard encoding) of the bytes
	Base64 bool
	Size   int64 // bytes read
}

// EntryType is the type of a listed entry.
type EntryType string

// Entry types.
const (
	TypeFile    EntryType = "file"
	TypeDir     EntryType = "dir"
	TypeSymlink EntryType = "symlink"
	TypeOther   EntryType = "other"
)

// Entry is one directory entry. Size is the entry's own size (a symlink's is its target's length; never followed).
type Entry struct {
	Name string
	Type EntryType
	Size int64
}

// Listing is what List returns: entries sorted by name; Truncated when the directory held more than maxEntries (the
// entries kept are then the first maxEntries the kernel returned, sorted).
type Listing struct {
	Entries   []Entry
	Truncated bool
}

// Read returns the regular file at path, beneath one of roots, if it is at most maxBytes long. Of opts, it reads
// Authorize.
func Read(roots []Root, path string, maxBytes int64, opts ...Option) (Content, error) {
	o := optionsOf(opts)
	t, err := pick("read", roots, path, false, nil)
	if err != nil {
		return Content{}, err
	}
	root := t.root
	fd, err := openBeneath(t, t.rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return Content{}, failAuthorized("read", path, t, t.rel, "", err, o.authorize, false, nil)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := checkPassage("read", path, t, fd, t.rel, "", o.authorize); err != nil {
		return Content{}, err
	}
	if err := checkResolved("read", path, t, fd, "", false, nil); err != nil {
		return Content{}, err
	}
	if err := authorize("read", path, t, fd, "", o.authorize); err != nil {
		return Content{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Content{}, fail("read", path, root, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return Content{}, &Error{Op: "read", Path: path, Root: root, Kind: KindIsDir}
	default:
		return Content{}, &Error{Op: "read", Path: path, Root: root, Kind: KindNotRegular}
	}
	if st.Size > maxBytes {
		return Content{}, &Error{Op: "read", Path: path, Root: root, Kind: KindTooLarge,
			Err: errors.New("file is " + itoa(st.Size) + " bytes, limit " + itoa(maxBytes))}
	}
	// The file may grow after fstat: read at most maxBytes+1 and refuse if the extra byte arrived.
	buf := make([]byte, 0, st.Size+1)
	b, err := readUpTo(f, buf, maxBytes+1)
	if err != nil {
		return Content{}, fail("read", path, root, err)
	}
	if int64(len(b)) > maxBytes {
		return Content{}, &Error{Op: "read", Path: path, Root: root, Kind: KindTooLarge,
			Err: errors.New("file grew past the limit of " + itoa(maxBytes) + " bytes while being read")}
	}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		return Content{Data: string(b), Size: int64(len(b))}, nil
	}
	return Content{Data: base64.StdEncoding.EncodeToString(b), Base64: true, Size: int64(len(b))}, nil
}

// Write creates or truncates the regular file at path, beneath one of roots that allows writing, and writes content
// (at most maxBytes, refused before anything is touched). The last component is never followed if it is a symlink;
// the parent directories must exist. The replacement is not atomic: a reader may see a short file meanwhile, and a
// file with several hard links is changed under all its names (see WriteAtomic).
func Write(roots []Root, path string, content []byte, maxBytes int64, opts ...Option) error {
	return write(roots, path, content, maxBytes, false, opts)
}

// WriteAtomic is Write by whole replacement: the content goes to a new file in the same directory, which is then
// renamed over path (renameat(2) on the parent's descriptor). Readers see the old file or the new one; a symlink at
// path is replaced, not followed; hard links to the old file keep the old content. The new file has the old file's
// permission bits when it was a regular file, else 0644 (less the umask).
func WriteAtomic(roots []Root, path string, content []byte, maxBytes int64, opts ...Option) error {
	return write(roots, path, content, maxBytes, true, opts)
}

func write(roots []Root, path string, content []byte, maxBytes int64, whole bool, opts []Option) error {
	o := optionsOf(opts)
	if int64(len(content)) > maxBytes {
		return &Error{Op: "write", Path: path, Kind: KindTooLarge,
			Err: errors.New("content is " + itoa(int64(len(content))) + " bytes, limit " + itoa(maxBytes))}
	}
	t, err := pick("write", roots, path, true, o.protected)
	if err != nil {
		return err
	}
	root, rel := t.root, t.rel
	if rel == "." {
		return &Error{Op: "write", Path: path, Root: root, Kind: KindIsDir}
	}
	// The parent first, checked against Deny and NoWrite roots where it really is, so that nothing is created there;
	// then the last component, beneath that parent, never followed.
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	pfd, err := openBeneath(t, dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return failAuthorized("write", path, t, dir, base, err, o.authorize, true, o.protected)
	}
	defer unix.Close(pfd)
	if err := checkPassage("write", path, t, pfd, dir, base, o.authorize); err != nil {
		return err
	}
	if err := checkResolved("write", path, t, pfd, base, true, o.protected); err != nil {
		return err
	}
	if err := authorize("write", path, t, pfd, base, o.authorize); err != nil {
		return err
	}
	if whole {
		return replace(pfd, base, path, root, content)
	}
	// O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of hanging; fstat below refuses it anyway.
	fd, err := openBeneathFD(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0o644)
	if err != nil {
		return fail("write", path, root, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fail("write", path, root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return &Error{Op: "write", Path: path, Root: root, Kind: KindNotRegular}
	}
	// Truncate only once the descriptor is known to be a regular file beneath the root.
	if err := unix.Ftruncate(fd, 0); err != nil {
		return fail("write", path, root, err)
	}
	if _, err := f.Write(content); err != nil {
		return fail("write", path, root, err)
	}
	if err := f.Close(); err != nil {
		return fail("write", path, root, err)
	}
	return nil
}

var tmpSeq atomic.Uint64

// replace writes content to a fresh file in the directory pfd and renames it over base.
func replace(pfd int, base, path, root string, content []byte) error {
	mode, replacing := uint32(0o644), false
	var old unix.Stat_t
	switch err := unix.Fstatat(pfd, base, &old, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil && old.Mode&unix.S_IFMT == unix.S_IFDIR:
		return &Error{Op: "write", Path: path, Root: root, Kind: KindIsDir}
	case err == nil && old.Mode&unix.S_IFMT == unix.S_IFREG:
		mode, replacing = old.Mode&0o777, true
	case err == nil && old.Mode&unix.S_IFMT != unix.S_IFLNK:
		return &Error{Op: "write", Path: path, Root: root, Kind: KindNotRegular}
	case err != nil && !errors.Is(err, unix.ENOENT):
		return fail("write", path, root, err)
	}
	var tmp string
	var fd int
	for {
		tmp = ".safefs-" + itoa(int64(os.Getpid())) + "-" + itoa(int64(tmpSeq.Add(1))) + ".tmp"
		var err error
		fd, err = openBeneathFD(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, mode)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return fail("write", path, root, err)
		}
		break
	}
	f := os.NewFile(uintptr(fd), tmp)
	var err error
	if replacing {
		// The umask applied at creation must not change a replaced file's bits; a new file keeps 0644 less the
		// umask (the process's choice of who may read what it creates).
		err = unix.Fchmod(fd, mode)
	}
	if err == nil {
		_, err = f.Write(content)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(pfd, tmp, pfd, base)
	}
	if err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return fail("write", path, root, err)
	}
	return nil
}

// List returns the entries of the directory at path, beneath one of roots, at most maxEntries of them. Of opts, it
// reads Authorize.
func List(roots []Root, path string, maxEntries int, opts ...Option) (Listing, error) {
	o := optionsOf(opts)
	t, err := pick("list", roots, path, false, nil)
	if err != nil {
		return Listing{}, err
	}
	root := t.root
	fd, err := openBeneath(t, t.rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return Listing{}, failAuthorized("list", path, t, t.rel, "", err, o.authorize, false, nil)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := checkPassage("list", path, t, fd, t.rel, "", o.authorize); err != nil {
		return Listing{}, err
	}
	if err := checkResolved("list", path, t, fd, "", false, nil); err != nil {
		return Listing{}, err
	}
	if err := authorize("list", path, t, fd, "", o.authorize); err != nil {
		return Listing{}, err
	}
	if maxEntries < 0 {
		maxEntries = 0
	}
	var names []string
	if maxEntries > 0 {
		names, err = f.Readdirnames(maxEntries + 1)
		if err != nil && err != io.EOF {
			return Listing{}, fail("list", path, root, err)
		}
	} else {
		names, _ = f.Readdirnames(1)
	}
	out := Listing{}
	if len(names) > maxEntries {
		out.Truncated = true
		names = names[:maxEntries]
	}
	sort.Strings(names)
	for _, name := range names {
		// fstatat relative to the open directory, never following: the entry itself, not a path looked up again.
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed meanwhile
			}
			return Listing{}, fail("list", path, root, err)
		}
		e := Entry{Name: name, Size: st.Size, Type: TypeOther}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type = TypeFile
		case unix.S_IFDIR:
			e.Type = TypeDir
		case unix.S_IFLNK:
			e.Type = TypeSymlink
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// target is where pick sent a call: the root chosen, the directory the kernel resolves from (the root itself, or
// an Exact root's parent) and the path relative to it; restr are the Deny and NoWrite roots to test after the open.
type target struct {
	root  string // the chosen root's path (for errors)
	dir   string // the directory opened, without following symlinks
	rel   string // path relative to dir ("." for dir itself)
	exact bool   // rel is an Exact root's last component: never followed
	restr []Root
}

// pick validates path and chooses the longest Read or Write root that covers it and allows the operation (an Exact
// root covers its own path only, and wins a tie). It refuses a path lexically beneath a Deny root (or, for a write, a
// NoWrite root, or with a component beneath the root named one of protected), and returns the Deny and NoWrite
// roots that checkResolved must test after the open.
func pick(op string, roots []Root, path string, write bool, protected []string) (target, error) {
	if len(path) > MaxPath {
		return target{}, &Error{Op: op, Path: path[:64] + "...", Kind: KindPathTooLong,
			Err: errors.New("path is " + itoa(int64(len(path))) + " bytes, limit 4096")}
	}
	if path == "" || !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.IndexByte(path, 0) >= 0 {
		return target{}, &Error{Op: op, Path: path, Kind: KindInvalidPath,
			Err: errors.New("want an absolute, normalised path (no \"..\", \".\", \"//\" or trailing \"/\")")}
	}
	best, bestExact, covered := "", false, false
	var restr []Root
	for _, r := range roots {
		rp := filepath.Clean(r.Path)
		if !filepath.IsAbs(rp) {
			continue
		}
		switch r.Access {
		case AccessDeny, AccessNoWrite:
			if r.Access == AccessNoWrite && !write {
				continue
			}
			if within(rp, path) {
				k := KindDenied
				if r.Access == AccessNoWrite {
					k = KindProtected
				}
				return target{}, &Error{Op: op, Path: path, Root: rp, Kind: k}
			}
			restr = append(restr, Root{Path: rp, Access: r.Access})
			continue
		case AccessRead, AccessWrite:
		default:
			continue
		}
		exact := r.Exact
		if exact && rp != path || !within(rp, path) {
			continue
		}
		covered = true
		if write && r.Access != AccessWrite {
			continue
		}
		if len(rp) > len(best) || len(rp) == len(best) && exact && !bestExact {
			best, bestExact = rp, exact
		}
	}
	if best == "" {
		if covered {
			return target{}, &Error{Op: op, Path: path, Kind: KindReadOnly}
		}
		return target{}, &Error{Op: op, Path: path, Kind: KindOutside}
	}
	t := target{root: best, dir: best, exact: bestExact, restr: restr}
	switch {
	case bestExact && best == "/": // "/" itself, opened as the root it is (it has no parent to open it from)
		t.rel = "."
	case bestExact:
		t.dir, t.rel = filepath.Dir(best), filepath.Base(best)
	default:
		t.rel = strings.TrimPrefix(strings.TrimPrefix(path, best), "/")
		if t.rel == "" {
			t.rel = "."
		}
	}
	if write {
		if n := protectedIn(t.rel, protected); n != "" {
			return target{}, &Error{Op: op, Path: path, Root: best, Kind: KindProtected,
				Err: errors.New("a component is named " + n + ", which is never writable")}
		}
	}
	return t, nil
}

// protectedIn returns the first component of rel named one of names, or "".
func protectedIn(rel string, names []string) string {
	if len(names) == 0 {
		return ""
	}
	for _, c := range strings.Split(rel, "/") {
		for _, n := range names {
			if c == n {
				return n
			}
		}
	}
	return ""
}

// checkResolved refuses an opened descriptor (plus name, for a write's parent) that the kernel resolved beneath one
// of the Deny or NoWrite roots in t.restr, or (a write with protected names) whose resolved path beneath the root has
// a component with a protected name: the caller's path did not say so, but a symlink led there. The resolved path
// comes from /proc/self/fd; when it cannot be read the answer is a refusal.
func checkResolved(op, path string, t target, fd int, name string, write bool, protected []string) error {
	if len(t.restr) == 0 && (!write || len(protected) == 0) {
		return nil
	}
	real, err := resolved(fd)
	if err != nil {
		return &Error{Op: op, Path: path, Root: t.root, Kind: KindIO,
			Err: errors.New("cannot tell where the path resolved (" + err.Error() + "), so deny entries and protected names cannot be checked")}
	}
	if name != "" {
		real = filepath.Join(real, name)
	}
	return checkPath(op, path, t, real, write, protected)
}

// checkPath is checkResolved for a path real beneath t.dir, resolved or (a failed open) as far as it would have
// led: beneath a Deny root, or for a write beneath a NoWrite root or under a protected name.
func checkPath(op, path string, t target, real string, write bool, protected []string) error {
	if err := checkDeny(op, path, t, real, write); err != nil {
		return err
	}
	if write && len(protected) > 0 {
		// The components beneath the directory resolved from (opened without symlinks, so its real path is t.dir
		// unless it was moved meanwhile: then every component counts).
		rel := real
		if within(t.dir, real) {
			rel = strings.TrimPrefix(strings.TrimPrefix(real, t.dir), "/")
		}
		if n := protectedIn(rel, protected); n != "" {
			return &Error{Op: op, Path: path, Root: t.root, Kind: KindProtected,
				Err: errors.New("resolves to " + real + ", under the protected name " + n)}
		}
	}
	return nil
}

// checkDeny refuses real when it is beneath one of the Deny roots of t.restr (or, write, of its NoWrite roots),
// named as given or with symlinks evaluated.
func checkDeny(op, path string, t target, real string, write bool) error {
	for _, r := range t.restr {
		if r.Access != AccessDeny && !write {
			continue
		}
		rp := r.Path
		if ev, err := filepath.EvalSymlinks(rp); err == nil {
			rp = ev
		}
		if !within(rp, real) && !within(r.Path, real) {
			continue
		}
		if r.Access == AccessDeny {
			return &Error{Op: op, Path: path, Root: r.Path, Kind: KindDenied, Err: errors.New("resolves to " + real)}
		}
		return &Error{Op: op, Path: path, Root: r.Path, Kind: KindProtected, Err: errors.New("resolves to " + real)}
	}
	return nil
}

// authorize asks fn (Authorize's) about the descriptor fd (plus name, for a write's parent): where the kernel resolved
// it. t.dir (the root, or an Exact root's parent) was opened without following any symlink (openRoot), so its path
// is its real path and the resolved path beneath it is already named as the caller names the root. Nothing to ask
// without fn; a refusal when the resolved path cannot be read or is not beneath t.dir (the directory moved since:
// refused rather than guessed).
func authorize(op, path string, t target, fd int, name string, fn func(string) error) error {
	if fn == nil {
		return nil
	}
	real, err := resolved(fd)
	if err != nil {
		return &Error{Op: op, Path: path, Root: t.root, Kind: KindIO,
			Err: errors.New("cannot tell where the path resolved (" + err.Error() + "), so it cannot be authorized")}
	}
	if name != "" {
		real = filepath.Join(real, name)
	}
	if !within(t.dir, real) {
		return &Error{Op: op, Path: path, Root: t.root, Kind: KindIO,
			Err: errors.New("the path resolved outside " + t.dir + ", which moved while it was opened, so it cannot be authorized")}
	}
	if err := fn(real); err != nil {
		return &Error{Op: op, Path: path, Root: t.root, Kind: KindRefused, Err: err}
	}
	return nil
}

// failAuthorized is fail for an open of rel beneath t (a write: of its parent rel, then name) that failed. Where
// symlinks are followed (openat2, not an Exact target), whatever the error (ENOENT, ENOTDIR, and EXDEV or ELOOP from
// a link found on the way: each depends on what is there), it first follows the way the path went as far as it
// exists (retrace), asking what an open that succeeded would have asked (checkPassage, checkResolved, authorize):
// beneath a Deny root (a write: a NoWrite root, a protected name) it is refused as such, and where fn (Authorize's)
// says no, in its words. Where the way stopped (nothing there, or a file with more to come) it asks about the place
// the path names from there up to a "..", as if what it names were there. So neither not_found nor not_directory
// tells, through a symlink, what exists where the caller may not look. When the way cannot be told (the filesystem
// changed meanwhile, a link leaves t.dir, too many links), the open's own answer stands.
func failAuthorized(op, path string, t target, rel, name string, err error, fn func(string) error, write bool, protected []string) error {
	if (fn == nil && len(t.restr) == 0 && (!write || len(protected) == 0)) || t.exact || Method() != "openat2" {
		return fail(op, path, t.root, err)
	}
	named := filepath.Join(t.dir, rel, name)
	ask := asker(op, path, t, named, fn)
	w, ok, ferr := retrace(t, rel, tail(name), ask)
	switch {
	case ferr != nil:
		return ferr
	case !ok:
		return fail(op, path, t.root, err)
	}
	// Where it would have ended: past the stop as the path names it (a ".." first: only the place it would turn back
	// from is known, asked as such), or where it resolved (a file where the open wanted a directory), plus a write's
	// last component.
	p, rest := w.stop, w.rest
	if p == "" {
		p, rest = w.end, nil
	}
	if name != "" {
		rest = append(append([]string(nil), rest...), name)
	}
	p, back := project(p, rest)
	if back {
		if ferr := ask(p); ferr != nil {
			return ferr
		}
		return fail(op, path, t.root, err)
	}
	if ferr := checkPath(op, path, t, p, write, protected); ferr != nil {
		return ferr
	}
	if fn != nil {
		if ferr := fn(p); ferr != nil {
			return &Error{Op: op, Path: path, Root: t.root, Kind: KindRefused, Err: ferr}
		}
	}
	return fail(op, path, t.root, err)
}

// checkPassage asks about the way an open that succeeded went, when it followed a symlink (the descriptor fd's
// resolved path is not the path named, t.dir/rel): retrace asks about every place the way turned back from (a ".."
// leaving it, a symlink not on the path named). Where the open ended is checked after it (checkResolved, authorize),
// as for every open. A link "../private/x/../../pub/f" thus answers as its twin "../private/nox/../../pub/f", whose
// open fails (failAuthorized): refused at private/x whether or not it exists. Without fn and Deny roots, or where no
// symlink is followed (the walk, an Exact target), there is nothing to ask. When the way cannot be retraced (it
// changed meanwhile), the open is refused.
func checkPassage(op, path string, t target, fd int, rel, name string, fn func(string) error) error {
	if (fn == nil && len(t.restr) == 0) || t.exact || Method() != "openat2" {
		return nil
	}
	named := filepath.Join(t.dir, rel, name)
	real, err := resolved(fd)
	if err != nil || real == filepath.Join(t.dir, rel) {
		return nil // not through a symlink; or unreadable, which checkResolved and authorize refuse
	}
	w, ok, ferr := retrace(t, rel, tail(name), asker(op, path, t, named, fn))
	switch {
	case ferr != nil:
		return ferr
	case !ok || w.stop != "" || w.end != real:
		// (The kernel followed the links one way, the retrace another: they changed in between.)
		return &Error{Op: op, Path: path, Root: t.root, Kind: KindIO,
			Err: errors.New("the symlinks on the way changed while it was opened, so where it went cannot be checked")}
	}
	return nil
}

// asker is how retrace asks about a place p on the way: refused beneath a Deny root (KindDenied) or where fn says no
// (KindRefused, in fn's words). The path named and the directories above it, which the caller named itself, are not
// asked about.
func asker(op, path string, t target, named string, fn func(string) error) func(p string) error {
	return func(p string) error {
		if within(p, named) {
			return nil
		}
		if err := checkDeny(op, path, t, p, false); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(p); err != nil {
				return &Error{Op: op, Path: path, Root: t.root, Kind: KindRefused, Err: err}
			}
		}
		return nil
	}
}

// way is where a path beneath t.dir resolved, followed in user space (retrace).
type way struct {
	stop string   // where it stopped (missing, or not a directory with more to come); "" when it resolved
	rest []string // after stop, what the path (and the links it followed) named next
	end  string   // where it resolved, when it did
}

// retrace follows rel beneath t.dir as openat2 with RESOLVE_BENEATH does, one component at a time without letting
// the kernel follow anything: a symlink's target (relative; an absolute one is refused, as RESOLVE_BENEATH refuses it)
// is taken in the directory holding it and ".." goes back to the directory it came from. A last component that is
// a symlink is followed too. ok is false when it cannot tell: a ".." above t.dir, an absolute link, more than 40
// links (the kernel's limit), or an error other than a missing component. last (a write's last component, which is
// not followed) counts only in what is asked.
//
// On the way it asks (ask; its first error ends the way, err) about each place the way turns back from, named as
// the path in hand names it, never by what is found beyond it: a directory that a ".." leaves, and a symlink (before
// its target is read), asked as the place the path names from there up to a ".." (project). Everything asked is
// thus named by the path and the targets of the links already allowed, and a refused place answers the same whether
// it exists, is a file, a directory or a link: what the caller may not look at does not change the question.
// A way that only goes down (a link to "sub/f", or "../private/key") asks nothing here: where it ends is asked after.
func retrace(t target, rel string, last []string, ask func(string) error) (w way, ok bool, err error) {
	rootfd, err := openRoot(t.dir)
	if err != nil {
		return way{}, false, nil
	}
	fds, dirs := []int{rootfd}, []string{t.dir}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	queue := strings.Split(rel, "/")
	for links := 0; len(queue) > 0; {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(fds) == 1 {
				return way{}, false, nil // RESOLVE_BENEATH refuses it (an escape)
			}
			if err := ask(dirs[len(dirs)-1]); err != nil {
				return way{}, false, err
			}
			unix.Close(fds[len(fds)-1])
			fds, dirs = fds[:len(fds)-1], dirs[:len(dirs)-1]
			continue
		}
		cur := fds[len(fds)-1]
		p := filepath.Join(dirs[len(dirs)-1], c)
		var st unix.Stat_t
		if err := unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return way{stop: p, rest: queue}, true, nil
			}
			return way{}, false, nil
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if links++; links > 40 {
				return way{}, false, nil
			}
			if q, _ := project(p, append(append([]string(nil), queue...), last...)); p != "" {
				if err := ask(q); err != nil {
					return way{}, false, err
				}
			}
			target, err := readlinkAt(cur, c)
			if err != nil || filepath.IsAbs(target) {
				return way{}, false, nil
			}
			queue = append(strings.Split(target, "/"), queue...)
		case unix.S_IFDIR:
			fd, err := unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return way{}, false, nil
			}
			fds, dirs = append(fds, fd), append(dirs, p)
		default:
			if more(queue) {
				return way{stop: p, rest: queue}, true, nil // ENOTDIR
			}
			return way{end: p}, true, nil
		}
	}
	return way{end: dirs[len(dirs)-1]}, true, nil
}

// tail is a write's last component as retrace's last (none for a read or list).
func tail(name string) []string {
	if name == "" {
		return nil
	}
	return []string{name}
}

// project is p followed by the names of comps up to the first ".." (back: there was one), as if each were a
// directory: where a path that stopped at p, or reached a symlink there, would have gone before turning back.
func project(p string, comps []string) (q string, back bool) {
	for _, c := range comps {
		switch c {
		case "", ".":
		case "..":
			return p, true
		default:
			p = filepath.Join(p, c)
		}
	}
	return p, false
}

// more: comps holds a component other than "" and ".".
func more(comps []string) bool {
	for _, c := range comps {
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// readlinkAt is the target of the symlink name in the directory dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// resolved is the path the kernel resolved the descriptor fd to, from /proc/self/fd, once that path is known to name
// the very file fd is (lstat finds the same device and inode there): a file removed since it was opened is named
// "PATH (deleted)" there, a path no exact deny or refusal names, and one moved or replaced meanwhile may be named by
// a path that is now another file's. Either is an error, never a path to decide on.
func resolved(fd int) (string, error) {
	real, err := os.Readlink("/proc/self/fd/" + itoa(int64(fd)))
	if err != nil || !filepath.IsAbs(real) {
		return "", errors.New("is /proc mounted?")
	}
	var st, at unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", err
	}
	if err := unix.Fstatat(unix.AT_FDCWD, real, &at, unix.AT_SYMLINK_NOFOLLOW); err != nil || at.Dev != st.Dev || at.Ino != st.Ino {
		return "", errors.New("it was removed or moved while it was opened")
	}
	return real, nil
}

func within(root, path string) bool {
	return root == "/" || path == root || strings.HasPrefix(path, root+"/")
}

// fail turns an errno from the open or I/O into an Error.
func fail(op, path, root string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		if e.Op == "" {
			e.Op, e.Path = op, path
		}
		return err
	}
	k := KindIO
	switch {
	case errors.Is(err, unix.ENOENT):
		k = KindNotFound
	case errors.Is(err, unix.EXDEV):
		k = KindEscape
	case errors.Is(err, unix.ELOOP):
		k = KindSymlink
	case errors.Is(err, unix.EISDIR):
		k = KindIsDir
	case errors.Is(err, unix.ENOTDIR):
		k = KindNotDir
	case errors.Is(err, unix.ENXIO):
		k = KindNotRegular
	}
	return &Error{Op: op, Path: path, Root: root, Kind: k, Err: err}
}

// Method names the resolution this process uses: "openat2" (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) or "openat"
// (the no-symlinks walk, when the kernel lacks openat2).
func Method() string {
	if haveOpenat2() && !forceWalk.Load() {
		return "openat2"
	}
	return "openat"
}

// forceWalk makes the tests run the fallback on kernels that have openat2.
var forceWalk atomic.Bool

// ForceWalkForTesting makes this process use the openat walk (walk true) or the usual choice (false), for tests of
// callers that must hold under both methods; it returns a function restoring the previous setting. Not for use
// outside tests: the walk is stricter (it follows no symlink at all) and slower.
func ForceWalkForTesting(walk bool) (restore func()) {
	old := forceWalk.Swap(walk)
	return func() { forceWalk.Store(old) }
}

var (
	probeOnce sync.Once
	probeOK   bool
)

func haveOpenat2() bool {
	probeOnce.Do(func() {
		// A real use, not just "is the syscall there": a seccomp filter may answer EPERM rather than ENOSYS, and then
		// the walk is the only thing that works.
		rootfd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return
		}
		defer unix.Close(rootfd)
		fd, err := unix.Openat2(rootfd, ".", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
		if err == nil {
			unix.Close(fd)
		}
		probeOK = err == nil
	})
	return probeOK
}

// openBeneath opens rel beneath t.dir with flags (O_CLOEXEC always added) and returns the descriptor. t.dir is
// opened without following any symlink; an Exact target's rel (its last component) is not followed either.
func openBeneath(t target, rel string, flags int, mode uint32) (int, error) {
	rootfd, err := openRoot(t.dir)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, &Error{Kind: KindSymlink, Root: t.root, Err: errors.New("the allowed root " + t.dir +
				" has a symlink in its path, and roots are opened without following symlinks (name its real path)")}
		}
		return -1, err
	}
	defer unix.Close(rootfd)
	if t.exact && rel != "." {
		return openBeneathRes(rootfd, rel, flags, mode, unix.RESOLVE_NO_SYMLINKS)
	}
	return openBeneathFD(rootfd, rel, flags, mode)
}

// openRoot opens the directory dir (absolute) as O_PATH without following a symlink anywhere on the way.
func openRoot(dir string) (int, error) {
	const flags = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
	if Method() == "openat2" {
		how := &unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		// No O_NOFOLLOW: with O_PATH it would open a final symlink itself (ENOTDIR); RESOLVE_NO_SYMLINKS says ELOOP.
		for range 64 {
			fd, err := unix.Openat2(unix.AT_FDCWD, dir, how)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return fd, err
		}
		return -1, unix.EAGAIN
	}
	slash, err := unix.Open("/", flags, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(slash)
	return walk(slash, strings.TrimPrefix(dir, "/"), flags, 0)
}

// openBeneathFD opens rel beneath the directory descriptor rootfd.
func openBeneathFD(rootfd int, rel string, flags int, mode uint32) (int, error) {
	return openBeneathRes(rootfd, rel, flags, mode, 0)
}

// openBeneathRes is openBeneathFD with more RESOLVE_ flags for openat2 (the walk follows no symlink anyway).
func openBeneathRes(rootfd int, rel string, flags int, mode uint32, resolve uint64) (int, error) {
	if Method() == "openat2" {
		how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | resolve}
		for range 64 {
			fd, err := unix.Openat2(rootfd, rel, how)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue // a concurrent rename: the kernel asks to retry
			}
			return fd, err
		}
		return -1, unix.EAGAIN
	}
	return walk(rootfd, rel, flags, mode)
}

// walk opens rel component by component from dirfd without following any symlink and without "..".
func walk(dirfd int, rel string, flags int, mode uint32) (int, error) {
	var comps []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "", ".":
		case "..":
			return -1, unix.EXDEV
		default:
			comps = append(comps, c)
		}
	}
	if len(comps) == 0 {
		return unix.Openat(dirfd, ".", flags|unix.O_CLOEXEC, mode)
	}
	cur := dirfd
	defer func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}()
	for _, c := range comps[:len(comps)-1] {
		// O_PATH|O_NOFOLLOW opens a symlink itself; fstat of that descriptor says what was there at open time.
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(next)
			switch {
			case err != nil:
				return -1, err
			case st.Mode&unix.S_IFMT == unix.S_IFLNK:
				return -1, unix.ELOOP
			default:
				return -1, unix.ENOTDIR
			}
		}
		if cur != dirfd {
			unix.Close(cur)
		}
		cur = next
	}
	last := comps[len(comps)-1]
	fd, err := unix.Openat(cur, last, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) && isSymlinkAt(cur, last) {
		return -1, unix.ELOOP
	}
	return fd, err
}

func isSymlinkAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

func readUpTo(r io.Reader, buf []byte, limit int64) ([]byte, error) {
	lr := io.LimitReader(r, limit)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
