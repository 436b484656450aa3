package mcpserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/maiden-run/maiden/config"
	"github.com/pelletier/go-toml/v2"
)

// WatchOptions configure Watch.
type WatchOptions struct {
	// Interval between checks of the files; 0 means 500ms. Polling (a stat
	// per file) is cheap at this rate, works on every filesystem including
	// network mounts and editor rename-over saves, and needs no dependency.
	Interval time.Duration
	// Settle is how long the files must stay unchanged before a reload, so
	// that a build writing a file in steps is picked up once, complete; 0
	// means 300ms.
	Settle time.Duration
	// OnReload, if set, is told about each reload: the config problems that
	// kept the old configuration in force (config.Errors), or the tools not
	// served.
	OnReload func(err error, problems []Problem)
}

// Watch keeps the server in step with the configuration file at path and
// the tool files it names, until ctx ends. It records the files' state
// before returning and watches from a goroutine of its own. An edited agent.toml is loaded
// and, if valid, replaces the host's configuration; if invalid, the old one
// stays in force and the errors are reported. Then the tool list is synced,
// which notifies clients if it changed. (A changed .wasm is already picked up
// by the next call without this; the watch tells clients.)
func (s *Server) Watch(ctx context.Context, path string, o WatchOptions) {
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Settle <= 0 {
		o.Settle = 300 * time.Millisecond
	}
	last := s.snapshot(path, nil)
	go s.watch(ctx, path, o, last)
}

func (s *Server) watch(ctx context.Context, path string, o WatchOptions, last fileState) {
	var changedAt time.Time
	// extra are the tool files named by an agent.toml that failed to load
	// (say a tool added before its .wasm was built): when one appears,
	// the file is loaded again, without waiting for agent.toml to be saved.
	var extra []string
	wasBad := false // the last reload found errors
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := s.snapshot(path, extra)
		if !now.equal(last) {
			last, changedAt = now, time.Now()
			continue
		}
		if changedAt.IsZero() || time.Since(changedAt) < o.Settle {
			continue
		}
		changedAt = time.Time{}
		before := s.host.Config()
		problems, err := s.reload(ctx, path)
		extra = nil
		bad := errors.As(err, new(config.Errors))
		if bad {
			extra = namedPaths(path)
		}
		// One line per reload: what is wrong, or what changed (and that
		// the errors of the last reload are fixed).
		switch {
		case bad:
			s.log.Error("reload: agent.toml has errors; keeping the configuration in force", "file", path, "errors", err.Error())
		case err != nil:
			s.log.Error("reload failed", "file", path, "error", err)
		default:
			changes := ConfigChanges(before, s.host.Config())
			if wasBad {
				changes = "the errors are fixed; " + changes
			}
			s.log.Info("reloaded", "file", path, "changes", changes)
		}
		wasBad = bad
		// The new configuration may name other files. A file this reload
		// saw keeps the stamp it had before loading: an edit saved while
		// the reload ran (or just after its line was logged, by someone
		// who waited for it) differs from that stamp and is loaded next;
		// stamping it now would take it as loaded and lose it.
		last = s.snapshot(path, extra)
		for p, st := range now {
			if _, ok := last[p]; ok {
				last[p] = st
			}
		}
		if o.OnReload != nil {
			o.OnReload(err, problems)
		}
	}
}

func (s *Server) reload(ctx context.Context, path string) ([]Problem, error) {
	cfg, err := config.Load(path)
	var errs config.Errors
	if err != nil && !errors.As(err, &errs) {
		return nil, err
	}
	if err == nil {
		s.host.SetConfig(cfg)
	}
	problems, serr := s.Sync(ctx)
	if err == nil {
		err = serr
	}
	return problems, err
}

// fileState is what the watch compares: modification time, size and
// existence of the config file and of every tool file it names.
type fileState map[string]fileStamp

type fileStamp struct {
	mtime time.Time
	size  int64
}

func (s *Server) snapshot(path string, extra []string) fileState {
	st := fileState{}
	stamp := func(p string) {
		if fi, err := os.Stat(p); err == nil {
			st[p] = fileStamp{fi.ModTime(), fi.Size()}
		} else {
			st[p] = fileStamp{}
		}
	}
	stamp(path)
	for _, t := range s.host.Config().Tools() {
		stamp(t.Path)
	}
	for _, p := range extra {
		stamp(p)
	}
	// The pins of imported tools: an operator's maiden mcp accept (another
	// process) reaches the clients' tool lists with the next Sync.
	if p := s.host.MCPPinsPath(); p != "" {
		stamp(p)
	}
	return st
}

// namedPaths returns the tool files ([tools.NAME] path) that the TOML at
// path names, resolved as config.Load resolves them, read leniently: it is
// for a file config.Load refused, so whatever can be read is worth watching.
func namedPaths(path string) []string {
	data, err := config.ReadFile(path, config.MaxFileBytes)
	if err != nil {
		return nil
	}
	var doc struct {
		Tools map[string]struct {
			Path string `toml:"path"`
		} `toml:"tools"`
	}
	if toml.Unmarshal(data, &doc) != nil {
		return nil
	}
	var out []string
	for _, t := range doc.Tools {
		if t.Path == "" {
			continue
		}
		p := t.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		out = append(out, filepath.Clean(p))
	}
	sort.Strings(out)
	return out
}

func (a fileState) equal(b fileState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !v.mtime.Equal(w.mtime) || v.size != w.size {
			return false
		}
	}
	return true
}

// sameBesidesLines is reflect.DeepEqual passing over every int field whose
// name ends in "Line" (where in agent.toml a table or key was), at any
// depth: a tool or an agent whose tables only moved is not changed. Like
// DeepEqual it takes two pointers it is already comparing as equal, so a
// cycle (a wrapped CLI's command knows its parent) ends.
func sameBesidesLines(a, b reflect.Value) bool {
	return sameValues(a, b, map[[2]uintptr]bool{})
}

func sameValues(a, b reflect.Value, seen map[[2]uintptr]bool) bool {
	if !a.IsValid() || !b.IsValid() {
		return a.IsValid() == b.IsValid()
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			f := a.Type().Field(i)
			if strings.HasSuffix(f.Name, "Line") && f.Type.Kind() == reflect.Int {
				continue
			}
			if !sameValues(a.Field(i), b.Field(i), seen) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValues(a.Index(i), b.Index(i), seen) {
				return false
			}
		}
		return true
	case reflect.Pointer:
		if a.Pointer() == b.Pointer() { // the same, or both nil
			return true
		}
		if a.IsNil() || b.IsNil() {
			return false
		}
		pair := [2]uintptr{a.Pointer(), b.Pointer()}
		if seen[pair] {
			return true
		}
		seen[pair] = true
		return sameValues(a.Elem(), b.Elem(), seen)
	case reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValues(a.Elem(), b.Elem(), seen)
	case reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		for _, k := range a.MapKeys() {
			w := b.MapIndex(k)
			if !w.IsValid() || !sameValues(a.MapIndex(k), w, seen) {
				return false
			}
		}
		return true
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return a.Pointer() == b.Pointer()
	default: // booleans, numbers, strings (exported or not)
		return a.Equal(b)
	}
}

// ConfigChanges says in a line what differs between two configurations:
// the tools (of every kind) and agents added, removed or changed, and
// whether anything else did ("no change" when nothing did).
func ConfigChanges(old, cur *config.Config) string {
	var parts []string
	diff := func(what string, before, after map[string]any) {
		var added, removed, changed []string
		for name, a := range after {
			b, ok := before[name]
			switch {
			case !ok:
				added = append(added, name)
			case !sameBesidesLines(reflect.ValueOf(a), reflect.ValueOf(b)):
				changed = append(changed, name)
			}
		}
		for name := range before {
			if _, ok := after[name]; !ok {
				removed = append(removed, name)
			}
		}
		for _, l := range []struct {
			verb  string
			names []string
		}{{"added", added}, {"removed", removed}, {"changed", changed}} {
			if len(l.names) > 0 {
				sort.Strings(l.names)
				parts = append(parts, what+" "+l.verb+": "+strings.Join(l.names, ", "))
			}
		}
	}
	// A table moved (its lines, and its bindings', grants',
	// middleware's and secrets' lines) is not changed: the lines are
	// passed over by sameBesidesLines.
	tools := func(c *config.Config) map[string]any {
		m := map[string]any{}
		for _, t := range c.Tools() {
			m[t.Name] = t
		}
		return m
	}
	agents := func(c *config.Config) map[string]any {
		m := map[string]any{}
		for _, a := range c.Agents() {
			m[a.Name] = a
		}
		return m
	}
	diff("tools", tools(old), tools(cur))
	diff("agents", agents(old), agents(cur))
	if !sameBesidesLines(reflect.ValueOf(old.Trace()), reflect.ValueOf(cur.Trace())) {
		// The exporter is built once, when maiden serve starts.
		parts = append(parts, "[trace] changed: it applies when maiden serve next starts")
	}
	if len(parts) == 0 {
		if sameBesidesLines(reflect.ValueOf(old.Middleware()), reflect.ValueOf(cur.Middleware())) &&
			sameBesidesLines(reflect.ValueOf(old.Operators()), reflect.ValueOf(cur.Operators())) &&
			old.StatePath() == cur.StatePath() && old.MaxInputBytes() == cur.MaxInputBytes() {
			return "no change to tools, agents, middleware or operators"
		}
		return "settings other than tools and agents changed"
	}
	return strings.Join(parts, "; ")
}
