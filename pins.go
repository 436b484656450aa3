package maiden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/mcpimport"
	"github.com/maiden-run/maiden/internal/regfile"
)

// This file is the pinning of imported MCP tools (issue 22): an upstream
// can change a tool whenever it likes (notifications/tools/list_changed, a
// restart), so maiden serves an imported tool only as an operator accepted
// it. The pin of a tool is the digest of its title, description and input
// schema in canonical form (mcpimport.PinOf); the accepted definitions are
// kept in maiden-pins.json next to agent.toml (Options.MCPPinsPath), written
// by `maiden mcp accept NAME` (Host.AcceptImport). A tool whose definition
// differs from its pin is refused (kind denied, naming what changed) and
// agents keep seeing the accepted definition; a tool never accepted is
// refused and not served, unless its import says accept_new_tools = true
// (then it is pinned on first sight).

// PinsFileName is the pin file's name next to agent.toml.
const PinsFileName = "maiden-pins.json"

// maxPinsBytes caps the pin file maiden reads.
const maxPinsBytes = 16 << 20

type pinEntry struct {
	mcpimport.Pin
	AcceptedAt time.Time `json:"accepted_at"`
}

type pinsFile struct {
	Version int                 `json:"version"`
	Tools   map[string]pinEntry `json:"tools"` // by NAME.TOOL
}

// pinStore caches the pin file, read again when its size or time changes
// (an operator's accept reaches a running serve at its next listing or
// call).
type pinStore struct {
	mu    sync.Mutex
	path  string
	stamp string // size and modification time of what m was read from
	m     map[string]pinEntry
	err   error // the file could not be read: every imported tool is refused
}

func (h *Host) pinsPath() string {
	if h.opts.MCPPinsPath != "" {
		return h.opts.MCPPinsPath
	}
	if d := h.cfg.Load().Dir(); d != "" {
		return filepath.Join(d, PinsFileName)
	}
	return ""
}

func stampOf(fi fs.FileInfo) string {
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
}

// loadLocked brings m up to date with the file. s.mu is held.
func (s *pinStore) loadLocked(path string) {
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

// pin returns the accepted pin of tool full (NAME.TOOL).
func (h *Host) pin(full string) (pinEntry, bool, error) {
	s := &h.pins
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked(h.pinsPath())
	if s.err != nil {
		return pinEntry{}, false, s.err
	}
	e, ok := s.m[full]
	return e, ok, nil
}

// savePins adds pins (by NAME.TOOL) to the file, atomically (a temporary
// file renamed over it).
func (h *Host) savePins(pins map[string]mcpimport.Pin) error {
	s := &h.pins
	s.mu.Lock()
	defer s.mu.Unlock()
	path := h.pinsPath()
	s.loadLocked(path)
	m := map[string]pinEntry{}
	if s.err == nil {
		for k, v := range s.m {
			m[k] = v
		}
	} // else: the unreadable file is replaced by what is accepted now
	now := time.Now().UTC().Truncate(time.Second)
	for k, p := range pins {
		m[k] = pinEntry{Pin: p, AcceptedAt: now}
	}
	if path == "" {
		s.m, s.err = m, nil
		return nil
	}
	data, err := json.MarshalIndent(pinsFile{Version: 1, Tools: m}, "", "  ")
	if err != nil {
		return err
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

// ImportedDefinition is what an imported tool shows agents: the upstream's
// title, description and input schema (as the upstream gave them: escape
// them before showing them on a terminal), and their pin digest.
type ImportedDefinition struct {
	Title       string `json:"title,omitempty"`
	Description string `json:"description"`
	InputSchema string `json:"input_schema"`
	Digest      string `json:"digest"`
}

// ImportReview is one tool of an import as an operator reviews it before
// accepting: State is "new" (never accepted), "changed" (Changes says what
// differs from Accepted) or "accepted" (Offered is what was accepted).
type ImportReview struct {
	Tool     string              `json:"tool"` // NAME.TOOL
	State    string              `json:"state"`
	Changes  []string            `json:"changes,omitempty"`
	Accepted *ImportedDefinition `json:"accepted,omitempty"`
	Offered  ImportedDefinition  `json:"offered"`
	pin      mcpimport.Pin
}

func definitionOf(p mcpimport.Pin) ImportedDefinition {
	return ImportedDefinition{Title: p.Title, Description: p.Description, InputSchema: string(p.InputSchema), Digest: p.Digest}
}

// ReviewImport starts import name (an [mcp.NAME] of agent.toml) if need be
// and returns each of its tools as the upstream offers it now, against what
// was accepted. An upstream that is not up is an error.
func (h *Host) ReviewImport(ctx context.Context, name string) ([]ImportReview, error) {
	if h.closed.Load() {
		return nil, ErrClosed
	}
	cfg := h.cfg.Load()
	t, ok := cfg.Tool(name)
	if _, isImport := h.kindsOf(cfg).imports[name]; !ok || !isImport {
		return nil, fmt.Errorf("%s has no [mcp.%s]", h.cfg.Load().File(), name)
	}
	up, err := h.upstream(ctx, name, t.MCP)
	if err != nil {
		return nil, err
	}
	if !up.Available() {
		return nil, fmt.Errorf("the MCP server %q is not up (see the log); nothing to review", name)
	}
	tools := exposedTools(name, up.Tools(), h.log)
	out := make([]ImportReview, 0, len(tools))
	for _, x := range tools {
		now := mcpimport.PinOf(x.Tool)
		r := ImportReview{Tool: x.Full, State: "new", Offered: definitionOf(now), pin: now}
		old, ok, err := h.pin(x.Full)
		if err != nil {
			ok = false // an unreadable pin file: everything is reviewed as new
		}
		if ok {
			def := definitionOf(old.Pin)
			r.Accepted = &def
			r.State = "accepted"
			if ch := old.Changes(now); ch != nil {
				r.State, r.Changes = "changed", ch
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// AcceptImport pins the definitions of reviews (from ReviewImport): what
// the operator was shown is what is accepted, even if the upstream has
// changed since.
func (h *Host) AcceptImport(reviews []ImportReview) error {
	pins := map[string]mcpimport.Pin{}
	for _, r := range reviews {
		if r.pin.Digest == "" {
			return fmt.Errorf("%s: not a review from ReviewImport", r.Tool)
		}
		pins[r.Tool] = r.pin
	}
	if err := h.savePins(pins); err != nil {
		return err
	}
	f := h.hub().Changed()
	if f != nil {
		go f()
	}
	return nil
}

// pinCheck decides whether imported tool x (exposed as full) may be served
// as the upstream offers it now. It returns the definition to serve (the
// accepted one; zero when none was) and, when the tool must be refused,
// why. imp's accept_new_tools pins a new tool here.
func (h *Host) pinCheck(imp string, mcp *config.MCPImport, full string, x mcpimport.Tool) (mcpimport.Pin, *ToolError) {
	now := mcpimport.PinOf(x)
	old, ok, err := h.pin(full)
	switch {
	case err != nil:
		return mcpimport.Pin{}, &ToolError{Kind: KindDenied, Message: err.Error()}
	case !ok && mcp.AcceptNewTools:
		if err := h.savePins(map[string]mcpimport.Pin{full: now}); err != nil {
			return mcpimport.Pin{}, &ToolError{Kind: KindDenied, Message: fmt.Sprintf("%s: accept_new_tools could not pin it: %v", full, err)}
		}
		h.log.Info("MCP tool pinned on first sight (accept_new_tools)", "tool", full, "digest", now.Digest)
		return now, nil
	case !ok:
		return mcpimport.Pin{}, &ToolError{Kind: KindDenied, Message: fmt.Sprintf(
			"the MCP server %q offers tool %s, which no operator has accepted; an operator must run maiden mcp accept %s to review and accept it", imp, full, imp)}
	}
	if ch := old.Changes(now); ch != nil {
		return old.Pin, &ToolError{Kind: KindDenied, Message: fmt.Sprintf(
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

// MCPPinsPath is the file the accepted definitions of imported tools are
// kept in ("" when they are kept in memory only).
func (h *Host) MCPPinsPath() string { return h.pinsPath() }
