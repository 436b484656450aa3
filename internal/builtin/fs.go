package builtin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/maiden-run/maiden/internal/safefs"
)

// Caps of the file tools.
const (
	MaxReadBytes   = 2 << 20 // fs_read: a larger file is refused (too_large)
	MaxWriteBytes  = 2 << 20 // fs_write: decoded content over this is refused before anything is touched
	MaxListEntries = 10_000  // fs_list: more entries are cut, with truncated set
	MaxPathBytes   = boundary.MaxPathLen
	// MaxFSInput bounds the input JSON of a file tool: 2 MiB of content written with JSON's longest escapes
	// (\u00XX, six bytes a byte) still fits.
	MaxFSInput = 6*MaxWriteBytes + 64<<10
)

// Encodings of file content.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// Names of the tools, also the stage of their CommandErrors.
const (
	ToolFSRead   = "fs_read"
	ToolFSWrite  = "fs_write"
	ToolFSList   = "fs_list"
	ToolWebFetch = "web_fetch"
)

// ReasonExplicitDeny is the CommandError reason of a path no expansion can ever allow: beneath an explicit deny, or
// a write under a protected name (BOUNDARIES.md assessment 1).
const ReasonExplicitDeny = "explicit_deny"

// ReasonNotManaged is the CommandError reason when the boundary is someone else's (kind external): maiden can
// neither check nor widen it, so nothing runs.
const ReasonNotManaged = "boundary_not_managed"

// Allow is the caller's cards on the file tools (CARDS.md: resource grants are separate from tool grants, so the
// call's tool:invoke does not grant the read or write it performs): it returns nil when the cards allow access a
// (boundary.Read, or boundary.Write) to path, else the refusal to report (its text names the grant missing). The
// tools ask it about where the path resolved, beneath the boundary's directory it was resolved under (a symlink
// beneath that directory can lead elsewhere in it), right before a byte is read, listed or written; the caller
// decides the path as asked itself, before the call runs (Target). nil allows what the boundary allows.
type Allow func(path string, a boundary.Access) error

// Target is the path a call of the file tool named tool (fs_read, fs_write, fs_list) with input in would touch in
// b, as the tool resolves it (a relative path beneath the workspace), and the access it needs: what the caller's
// cards decide before the call runs. ok is false for another tool, or an input or path the tool itself refuses
// (it says why when it runs).
func Target(tool string, b boundary.Boundary, in []byte) (p string, a boundary.Access, ok bool) {
	var x struct {
		Path string `json:"path"`
	}
	switch tool {
	case ToolFSRead, ToolFSList:
		a = boundary.Read
	case ToolFSWrite:
		a = boundary.Write
	default:
		return "", "", false
	}
	// The field alone, as leniently as the tool is strict: when the tool refuses the input, nothing is touched.
	if len(in) > MaxFSInput || json.Unmarshal(in, &x) != nil {
		return "", "", false
	}
	p, err := resolvePath(tool, b, x.Path)
	if err != nil {
		return "", "", false
	}
	return p, a, true
}

// authorizing is allow as safefs's Authorize option for access a: none when allow is nil.
func authorizing(allow Allow, a boundary.Access) []safefs.Option {
	if allow == nil {
		return nil
	}
	return []safefs.Option{safefs.Authorize(func(p string) error { return allow(p, a) })}
}

// FSReadInput is fs_read's input.
type FSReadInput struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding,omitempty"` // "text" (the default) or "base64"
}

// FSReadOutput is fs_read's output. Content is the file's text when it is valid UTF-8 without NUL bytes and text was
// asked for; otherwise its standard base64, with Encoding "base64".
type FSReadOutput struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	Size     int64  `json:"size"`
}

// FSWriteInput is fs_write's input. Content is required (it may be empty); Create defaults to true.
type FSWriteInput struct {
	Path     string  `json:"path"`
	Content  *string `json:"content"`
	Encoding string  `json:"encoding,omitempty"`
	Create   *bool   `json:"create,omitempty"`
}

// FSWriteOutput is fs_write's output: the bytes written.
type FSWriteOutput struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// FSListInput is fs_list's input.
type FSListInput struct {
	Path string `json:"path"`
}

// FSListOutput is fs_list's output: entries sorted by name, at most MaxListEntries (Truncated when there were more).
type FSListOutput struct {
	Path      string      `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// ListEntry is one directory entry; Type is file, dir, symlink or other; Size is the entry's own (a symlink is
// never followed).
type ListEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// FSRead reads one file inside b. Its output is a *FSReadOutput.
func FSRead(ctx context.Context, b boundary.Boundary, allow Allow, in []byte) (out any, err error) {
	var x FSReadInput
	if err := decode(ToolFSRead, in, MaxFSInput, &x); err != nil {
		return nil, err
	}
	if x.Encoding != "" && x.Encoding != EncodingText && x.Encoding != EncodingBase64 {
		return nil, errorf(ToolFSRead, x.Path, ReasonInvalidInput, "encoding %q: want \"text\" or \"base64\"", x.Encoding)
	}
	p, err := resolvePath(ToolFSRead, b, x.Path)
	if err != nil {
		return nil, err
	}
	if err := check(ToolFSRead, b, p, boundary.Read); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errorf(ToolFSRead, p, ReasonIO, "%v", err)
	}
	c, err := safefs.Read(roots(b, p), p, MaxReadBytes, authorizing(allow, boundary.Read)...)
	if err != nil {
		return nil, fsError(ToolFSRead, p, err)
	}
	o := &FSReadOutput{Path: p, Content: c.Data, Encoding: EncodingText, Size: c.Size}
	switch {
	case c.Base64:
		o.Encoding = EncodingBase64
	case x.Encoding == EncodingBase64:
		o.Content, o.Encoding = base64.StdEncoding.EncodeToString([]byte(c.Data)), EncodingBase64
	}
	return o, nil
}

// FSWrite replaces (or creates) one file inside b, atomically: readers see the old content or the new. Its output
// is a *FSWriteOutput.
func FSWrite(ctx context.Context, b boundary.Boundary, allow Allow, in []byte) (out any, err error) {
	var x FSWriteInput
	if err := decode(ToolFSWrite, in, MaxFSInput, &x); err != nil {
		return nil, err
	}
	if x.Content == nil {
		return nil, errorf(ToolFSWrite, x.Path, ReasonInvalidInput, "content is required (it may be \"\")")
	}
	data := []byte(*x.Content)
	switch x.Encoding {
	case "", EncodingText:
	case EncodingBase64:
		d, err := base64.StdEncoding.Strict().DecodeString(*x.Content)
		if err != nil {
			return nil, errorf(ToolFSWrite, x.Path, ReasonInvalidInput, "content is not standard base64: %v", err)
		}
		data = d
	default:
		return nil, errorf(ToolFSWrite, x.Path, ReasonInvalidInput, "encoding %q: want \"text\" or \"base64\"", x.Encoding)
	}
	p, err := resolvePath(ToolFSWrite, b, x.Path)
	if err != nil {
		return nil, err
	}
	if err := check(ToolFSWrite, b, p, boundary.Write); err != nil {
		return nil, err
	}
	if len(data) > MaxWriteBytes {
		return nil, errorf(ToolFSWrite, p, ReasonTooLarge, "content is %d bytes, over the %d-byte cap", len(data), MaxWriteBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, errorf(ToolFSWrite, p, ReasonIO, "%v", err)
	}
	rs := roots(b, p)
	auth := authorizing(allow, boundary.Write)
	if x.Create != nil && !*x.Create {
		// Existence only (a convenience, not a security check): a zero-byte read limit answers without reading.
		// Asked as the write is, so that it tells nothing of a path the cards do not let the call write.
		_, err := safefs.Read(rs, p, 0, auth...)
		switch {
		case errors.Is(err, safefs.ErrNotFound):
			return nil, errorf(ToolFSWrite, p, ReasonNotFound, "no such file, and create is false")
		case err != nil && !errors.Is(err, safefs.ErrTooLarge):
			return nil, fsError(ToolFSWrite, p, err)
		}
	}
	if err := safefs.WriteAtomic(rs, p, data, MaxWriteBytes, append(auth, protect(b))...); err != nil {
		return nil, fsError(ToolFSWrite, p, err)
	}
	return &FSWriteOutput{Path: p, Bytes: int64(len(data))}, nil
}

// FSList lists one directory inside b. Its output is a *FSListOutput.
func FSList(ctx context.Context, b boundary.Boundary, allow Allow, in []byte) (out any, err error) {
	var x FSListInput
	if err := decode(ToolFSList, in, MaxFSInput, &x); err != nil {
		return nil, err
	}
	p, err := resolvePath(ToolFSList, b, x.Path)
	if err != nil {
		return nil, err
	}
	if err := check(ToolFSList, b, p, boundary.Read); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, errorf(ToolFSList, p, ReasonIO, "%v", err)
	}
	l, err := safefs.List(roots(b, p), p, MaxListEntries, authorizing(allow, boundary.Read)...)
	if err != nil {
		return nil, fsError(ToolFSList, p, err)
	}
	o := &FSListOutput{Path: p, Entries: make([]ListEntry, 0, len(l.Entries)), Truncated: l.Truncated}
	for _, e := range l.Entries {
		o.Entries = append(o.Entries, ListEntry{Name: e.Name, Type: string(e.Type), Size: e.Size})
	}
	return o, nil
}

// resolvePath checks the caller's path and makes it absolute: a relative path is taken relative to the boundary's
// workspace (workspace-write boundaries only). The result is absolute, normalised, without NUL and at most
// MaxPathBytes long; nothing is ever cleaned silently ("a/../b" is refused, not turned into "b").
func resolvePath(tool string, b boundary.Boundary, p string) (string, error) {
	if p == "" {
		return "", errorf(tool, "", ReasonInvalidInput, "path is required")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errorf(tool, p, ReasonInvalidPath, "the path holds a NUL byte")
	}
	if !strings.HasPrefix(p, "/") {
		ws := ""
		if b.Filesystem == boundary.WorkspaceWrite {
			ws = b.Workspace
		}
		if ws == "" {
			return "", errorf(tool, p, ReasonInvalidPath, "a relative path needs a workspace, and this session's boundary has none: give an absolute path")
		}
		if p == "." || p == ".." || strings.HasPrefix(p, "../") || path.Clean(p) != p {
			return "", errorf(tool, p, ReasonInvalidPath, "a relative path must be normalised and stay in the workspace (no \"..\", \".\", \"//\" or trailing \"/\")")
		}
		p = path.Join(ws, p)
	}
	if path.Clean(p) != p {
		return "", errorf(tool, p, ReasonInvalidPath, "the path is not normalised (no \"..\", \".\", \"//\" or trailing \"/\"); nothing is cleaned for you")
	}
	if len(p) > MaxPathBytes {
		return "", errorf(tool, p, ReasonPathTooLong, "the path is %d bytes, over the %d-byte limit", len(p), MaxPathBytes)
	}
	return p, nil
}

// check is boundary.Check for one path, as the structured error when it fails.
func check(tool string, b boundary.Boundary, p string, a boundary.Access) error {
	ok, required := boundary.Check(b, boundary.Need{Path: p, Access: a})
	if ok {
		return nil
	}
	verb := "reading"
	if a == boundary.Write {
		verb = "writing"
	}
	if required != nil {
		return boundary.Required(boundary.DomainFilesystem, tool, *required,
			fmt.Sprintf("%s %s: %s it is outside the session's boundary; ask for requiredExpansion with request_sandbox_boundary", tool, shorten(p), verb))
	}
	if b.Kind != boundary.Managed {
		return boundary.Refused(boundary.DomainFilesystem, tool, ReasonNotManaged,
			fmt.Sprintf("%s %s: the session's boundary is %s, which maiden cannot check or widen", tool, shorten(p), b.Kind))
	}
	for _, d := range b.Deny {
		if within(p, d) {
			return boundary.Refused(boundary.DomainFilesystem, tool, ReasonExplicitDeny,
				fmt.Sprintf("%s %s: beneath the explicit deny %s, which no expansion can allow", tool, shorten(p), shorten(d)))
		}
	}
	if a == boundary.Write {
		for _, c := range strings.Split(p, "/") {
			for _, n := range b.Protected {
				if c == n {
					return boundary.Refused(boundary.DomainFilesystem, tool, ReasonExplicitDeny,
						fmt.Sprintf("%s %s: under the protected name %s, which is never writable", tool, shorten(p), shorten(n)))
				}
			}
		}
	}
	// Check refuses without an expansion only for the cases above and for a path no expansion can name.
	return errorf(tool, p, ReasonInvalidPath, "the path cannot be named in a boundary (it must be valid UTF-8)")
}

// within: p is root or beneath it (both absolute and normalised).
func within(p, root string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// roots maps b to the safefs roots for one call on p (which boundary.Check has allowed):
//   - every subtree entry covering p (the filesystem kind's implied ones too) is a root with its access;
//   - an entry naming p itself is an Exact root when it is an exact entry, or when p is not a directory now: safefs
//     grants that path only and never follows it if it is a symlink (the entry names the link, not its target);
//   - every deny path is a Deny root, checked where the path really resolved.
//
// safefs opens every root without following symlinks, so an entry whose path holds a symlink is refused rather than
// granting the target. For a write, the protected names go to safefs as ProtectNames (see protect). A bypass boundary
// is the whole filesystem, writable.
func roots(b boundary.Boundary, p string) []safefs.Root {
	if b.Kind == boundary.Bypass {
		return []safefs.Root{{Path: "/", Access: safefs.AccessWrite}}
	}
	entries := append(implied(b), b.Entries...)
	var out []safefs.Root
	for _, e := range entries {
		acc := safefs.AccessRead
		if e.Access == boundary.Write {
			acc = safefs.AccessWrite
		}
		switch {
		case e.Match != boundary.Subtree && e.Path != p:
			continue
		case !within(p, e.Path):
			continue
		}
		// An exact entry, or a subtree entry naming a file (or nothing yet, or a symlink): safefs opens it beneath
		// its parent without following it. (If the answer changes before the open, the open is still beneath the
		// parent and of p itself only.)
		exact := e.Path == p && (e.Match != boundary.Subtree || !isDir(p))
		out = append(out, safefs.Root{Path: e.Path, Access: acc, Exact: exact})
	}
	for _, d := range b.Deny {
		out = append(out, safefs.Root{Path: d, Access: safefs.AccessDeny})
	}
	return out
}

// protect is the safefs option refusing a write whose path, as given or as resolved beneath its root, has a
// component named one of b's protected names (a symlink ws/g -> sub/.git reaches a protected directory too).
func protect(b boundary.Boundary) safefs.Option {
	if b.Kind == boundary.Bypass {
		return safefs.ProtectNames()
	}
	return safefs.ProtectNames(b.Protected...)
}

// isDir: p is a directory now, not a symlink to one (safefs opens roots without following symlinks).
func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// implied is what the boundary's filesystem kind grants before its entries (BOUNDARIES.md; docs/boundaries.md).
func implied(b boundary.Boundary) []boundary.Entry {
	switch b.Filesystem {
	case boundary.Unrestricted:
		return []boundary.Entry{{Path: "/", Access: boundary.Write, Match: boundary.Subtree}}
	case boundary.WorkspaceWrite:
		return []boundary.Entry{
			{Path: "/", Access: boundary.Read, Match: boundary.Subtree},
			{Path: b.Workspace, Access: boundary.Write, Match: boundary.Subtree},
			{Path: "/tmp", Access: boundary.Write, Match: boundary.Subtree},
		}
	}
	return nil
}

// fsError turns a safefs error on p into the tool's error. A path that resolved beneath a deny root or (for a write)
// a protected one is the structured explicit_deny; the message never says where it resolved, which would describe
// the filesystem beyond the boundary.
func fsError(tool, p string, err error) error {
	var se *safefs.Error
	if !errors.As(err, &se) {
		return errorf(tool, p, ReasonIO, "%v", err)
	}
	switch se.Kind {
	case safefs.KindDenied:
		return boundary.Refused(boundary.DomainFilesystem, tool, ReasonExplicitDeny,
			fmt.Sprintf("%s %s: resolves beneath an explicit deny, which no expansion can allow", tool, shorten(p)))
	case safefs.KindProtected:
		return boundary.Refused(boundary.DomainFilesystem, tool, ReasonExplicitDeny,
			fmt.Sprintf("%s %s: resolves beneath a protected name, which is never writable", tool, shorten(p)))
	case safefs.KindNotFound:
		if tool == ToolFSWrite {
			return errorf(tool, p, ReasonNotFound, "the parent directory does not exist (fs_write creates no directories)")
		}
		return errorf(tool, p, ReasonNotFound, "no such file or directory")
	case safefs.KindIsDir:
		return errorf(tool, p, ReasonIsDirectory, "is a directory")
	case safefs.KindNotDir:
		if tool == ToolFSList {
			return errorf(tool, p, ReasonNotDirectory, "is not a directory")
		}
		return errorf(tool, p, ReasonNotDirectory, "a component of the path is not a directory")
	case safefs.KindNotRegular:
		return errorf(tool, p, ReasonNotRegular, "is not a regular file (a device, FIFO or socket)")
	case safefs.KindTooLarge:
		return errorf(tool, p, ReasonTooLarge, "%s", causeOf(se))
	case safefs.KindEscape:
		return errorf(tool, p, ReasonSymlinkEscape, "a symlink or \"..\" on the way would leave the allowed directory %s", shorten(se.Root))
	case safefs.KindSymlink:
		if strings.Contains(causeOf(se), "has a symlink in its path") {
			// An entry of the boundary (the operator's path, not the filesystem beyond it) holds a symlink.
			return errorf(tool, p, ReasonSymlink, "%s", strings.TrimPrefix(causeOf(se), "safefs: "))
		}
		return errorf(tool, p, ReasonSymlink, "a symlink that is not followed here (the file itself, when writing; a path an entry names exactly; a /proc magic link; a loop; or any symlink when the kernel lacks openat2)")
	case safefs.KindInvalidPath:
		return errorf(tool, p, ReasonInvalidPath, "%s", causeOf(se))
	case safefs.KindPathTooLong:
		return errorf(tool, p, ReasonPathTooLong, "%s", causeOf(se))
	case safefs.KindRefused:
		// The caller's cards (Allow) said no: their words, which name the path decided and the grant missing.
		return errorf(tool, p, ReasonNoCard, "%s", causeOf(se))
	}
	// outside and read_only cannot happen once boundary.Check passed (the roots are built from the same boundary):
	// reported as they are, never as allowed.
	return errorf(tool, p, ReasonIO, "%v", se)
}

func causeOf(e *safefs.Error) string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return string(e.Kind)
}
