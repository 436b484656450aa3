package mcpimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/regfile"
)

// This file is the pin file (maiden-pins.json next to agent.toml): the
// definitions of imported tools an operator accepted, read again when it
// changes and written atomically. The host decides with it (pins.go).

// AcceptedPin is a pin in the file, with when it was accepted.
type AcceptedPin struct {
	Pin
	AcceptedAt time.Time `json:"accepted_at"`
}

// maxPinsBytes caps the pin file maiden reads, and so the file Save
// writes: a file past it would refuse every imported tool at its next read.
const maxPinsBytes = 16 << 20

type pinsFile struct {
	Version int                    `json:"version"`
	Tools   map[string]AcceptedPin `json:"tools"` // by NAME.TOOL
}

// PinFile caches the pin file, read again when its size or time changes
// (an operator's accept reaches a running serve at its next listing or
// call).
type PinFile struct {
	mu    sync.Mutex
	path  string
	stamp string // size and modification time of what m was read from
	m     map[string]AcceptedPin
	err   error // the file could not be read: every imported tool is refused
}

func stampOf(fi fs.FileInfo) string {
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
}

// loadLocked brings m up to date with the file. s.mu is held.
func (s *PinFile) loadLocked(path string) {
	if path != s.path {
		s.path, s.stamp, s.m, s.err = path, "", nil, nil
	}
	if path == "" {
		return
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if s.stamp != "" { // removed: nothing is accepted any more
			s.m, s.stamp = nil, ""
		}
		s.err = nil
		return
	}
	if err == nil && stampOf(fi) == s.stamp && s.err == nil {
		return
	}
	var data []byte
	if err == nil {
		data, err = regfile.Read(path, maxPinsBytes)
	}
	var f pinsFile
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(data))
		d.DisallowUnknownFields()
		err = d.Decode(&f)
		if err == nil && f.Version != 1 {
			err = fmt.Errorf("version %d (this maiden reads version 1)", f.Version)
		}
	}
	if err != nil {
		s.err = fmt.Errorf("the pins of imported MCP tools, %s: %v; every imported tool is refused until it is fixed (maiden mcp accept NAME rewrites it)", path, err)
		s.m, s.stamp = nil, ""
		return
	}
	s.m, s.err, s.stamp = f.Tools, nil, stampOf(fi)
}

// Get returns the accepted pin of tool full (NAME.TOOL) in the file at
// path ("": kept in memory only). An unreadable file is an error that
// refuses every imported tool.
func (s *PinFile) Get(path, full string) (AcceptedPin, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked(path)
	if s.err != nil {
		return AcceptedPin{}, false, s.err
	}
	e, ok := s.m[full]
	return e, ok, nil
}

// count is the number of pins of import imp (NAME.*) in the file at path.
func (s *PinFile) count(path, imp string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked(path)
	n := 0
	for k := range s.m {
		if strings.HasPrefix(k, imp+".") {
			n++
		}
	}
	return n
}

// Save adds pins (by NAME.TOOL) to the file at path, atomically (a
// temporary file renamed over it); path "" keeps them in memory only.
func (s *PinFile) Save(path string, pins map[string]Pin) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked(path)
	m := map[string]AcceptedPin{}
	if s.err == nil {
		for k, v := range s.m {
			m[k] = v
		}
	} // else: the unreadable file is replaced by what is accepted now
	now := time.Now().UTC().Truncate(time.Second)
	for k, p := range pins {
		m[k] = AcceptedPin{Pin: p, AcceptedAt: now}
	}
	if path == "" {
		s.m, s.err = m, nil
		return nil
	}
	data, err := json.MarshalIndent(pinsFile{Version: 1, Tools: m}, "", "  ")
	if err != nil {
		return err
	}
	if len(data)+1 > maxPinsBytes {
		return fmt.Errorf("write the pins of imported MCP tools: %s would be %d bytes, over the %d bytes maiden reads; remove from it the pins of tools their servers no longer offer", path, len(data)+1, maxPinsBytes)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".maiden-pins-*.json")
	if err != nil {
		return fmt.Errorf("write the pins of imported MCP tools: %w", err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write the pins of imported MCP tools: %w", err)
	}
	s.m, s.err, s.stamp = m, nil, ""
	if fi, err := os.Stat(path); err == nil {
		s.stamp = stampOf(fi)
	}
	return nil
}

// Decide decides whether imported tool x of import imp, exposed as full
// (NAME.TOOL), may be served as the upstream offers it now, against the pin
// file at path. It returns the definition to serve (the accepted one; zero
// when none was) and, when the tool must be refused, why (kind denied,
// naming the change and the command that accepts it). acceptNew (the
// import's accept_new_tools) pins a new tool here.
func (s *PinFile) Decide(path, imp string, acceptNew bool, full string, x Tool, log *slog.Logger) (Pin, *api.ToolError) {
	now := PinOf(x)
	old, ok, err := s.Get(path, full)
	switch {
	case err != nil:
		return Pin{}, &api.ToolError{Kind: api.KindDenied, Message: err.Error()}
	case !ok && acceptNew:
		if n := s.count(path, imp); n >= MaxTools {
			where := path
			if where == "" {
				where = "memory (no pin file)"
			}
			// No pin is dropped to make room: a tool renamed away and
			// back with another definition would be pinned anew.
			log.Warn("MCP tool not pinned: the import holds the most pins it may (accept_new_tools)", "import", imp, "tool", full, "pins", n)
			return Pin{}, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf(
				"accept_new_tools did not pin %s: the MCP server %q already has %d tools pinned in %s, the most one import may hold (%d, the most it may list), so it has renamed or dropped tools it offered before; an operator must remove the pins of the tools it no longer offers from that file (or remove accept_new_tools and accept tools with maiden mcp accept %s)",
				full, imp, n, where, MaxTools, imp)}
		}
		if err := s.Save(path, map[string]Pin{full: now}); err != nil {
			return Pin{}, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf("%s: accept_new_tools could not pin it: %v", full, err)}
		}
		log.Info("MCP tool pinned on first sight (accept_new_tools)", "tool", full, "digest", now.Digest)
		return now, nil
	case !ok:
		return Pin{}, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf(
			"the MCP server %q offers tool %s, which no operator has accepted; an operator must run maiden mcp accept %s to review and accept it", imp, full, imp)}
	}
	if ch := old.Changes(now); ch != nil {
		return old.Pin, &api.ToolError{Kind: api.KindDenied, Message: fmt.Sprintf(
			"the upstream changed tool %s's %s since it was accepted; an operator must run maiden mcp accept %s to review and accept the change",
			full, joinAnd(ch), imp)}
	}
	return old.Pin, nil
}

func joinAnd(l []string) string {
	if len(l) < 2 {
		return strings.Join(l, "")
	}
	return strings.Join(l[:len(l)-1], ", ") + " and " + l[len(l)-1]
}
