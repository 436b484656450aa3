package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/maiden-run/maiden/internal/boundary"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

type toolFunc func(ctx context.Context, b boundary.Boundary, allow Allow, in []byte) (any, error)

// call runs fn with in marshalled to JSON, with no cards to ask (the boundary alone decides); a successful output
// is checked against the tool's output schema.
func call(t *testing.T, fn toolFunc, b boundary.Boundary, in any) (any, error) {
	t.Helper()
	return callAllow(t, fn, b, nil, in)
}

// callAllow is call with the caller's cards, allow.
func callAllow(t *testing.T, fn toolFunc, b boundary.Boundary, allow Allow, in any) (any, error) {
	t.Helper()
	raw, ok := in.([]byte)
	if !ok {
		var err error
		if raw, err = json.Marshal(in); err != nil {
			t.Fatal(err)
		}
	}
	out, err := fn(context.Background(), b, allow, raw)
	if err == nil {
		checkOutput(t, toolName(fn), out)
	} else if out != nil {
		t.Errorf("an error (%v) came with an output %v", err, out)
	}
	return out, err
}

func toolName(fn toolFunc) string {
	switch reflect.ValueOf(fn).Pointer() {
	case reflect.ValueOf(FSRead).Pointer():
		return ToolFSRead
	case reflect.ValueOf(FSWrite).Pointer():
		return ToolFSWrite
	case reflect.ValueOf(FSList).Pointer():
		return ToolFSList
	}
	return ""
}

var (
	schemaMu sync.Mutex
	schemas  = map[string]*jsonschema.Schema{}
)

func compiled(t *testing.T, name, src string) *jsonschema.Schema {
	t.Helper()
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemas[name]; ok {
		return s
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatalf("schema %s is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name+".json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name + ".json")
	if err != nil {
		t.Fatalf("schema %s does not compile: %v", name, err)
	}
	schemas[name] = s
	return s
}

// checkOutput validates out's JSON against the output schema of tool.
func checkOutput(t *testing.T, tool string, out any) {
	t.Helper()
	for _, s := range Specs {
		if s.Name != tool {
			continue
		}
		raw, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		if err := compiled(t, s.Name+"-out", s.OutputSchema).Validate(v); err != nil {
			t.Errorf("%s output %s does not match its schema: %v", tool, raw, err)
		}
		return
	}
	t.Fatalf("no spec for tool %q", tool)
}

// wantRequired asserts err is the structured sandbox_boundary_required error with exactly want as its expansion.
func wantRequired(t *testing.T, err error, domain, stage string, want boundary.Expansion) *boundary.CommandError {
	t.Helper()
	var ce *boundary.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want *boundary.CommandError", err, err)
	}
	if ce.Code != boundary.ErrorCode || ce.Domain != domain || ce.Stage != stage || ce.Reason != boundary.ReasonBoundaryRequired {
		t.Fatalf("command error = %+v, want %s/%s/%s", ce, domain, stage, boundary.ReasonBoundaryRequired)
	}
	if ce.RequiredExpansion == nil || !reflect.DeepEqual(*ce.RequiredExpansion, want) {
		t.Fatalf("requiredExpansion = %+v, want %+v", ce.RequiredExpansion, want)
	}
	return ce
}

// wantRefused asserts err is a structured error with reason and no expansion.
func wantRefused(t *testing.T, err error, reason string) *boundary.CommandError {
	t.Helper()
	var ce *boundary.CommandError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want *boundary.CommandError %s", err, err, reason)
	}
	if ce.Code != boundary.ErrorCode || ce.Reason != reason || ce.RequiredExpansion != nil {
		t.Fatalf("command error = %+v, want reason %s and no requiredExpansion", ce, reason)
	}
	raw, _ := json.Marshal(ce)
	if strings.Contains(string(raw), "requiredExpansion") {
		t.Fatalf("refusal JSON offers an expansion: %s", raw)
	}
	return ce
}

// wantError asserts err is an *Error with reason.
func wantError(t *testing.T, err error, reason string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *builtin.Error %s", err, err, reason)
	}
	if e.Reason != reason {
		t.Fatalf("err = %v: reason %q, want %q", err, e.Reason, reason)
	}
	return e
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// restricted is a managed, restricted boundary with entries, deny paths and protected names.
func restricted(entries []boundary.Entry, deny, protected []string) boundary.Boundary {
	return boundary.Boundary{Kind: boundary.Managed, Filesystem: boundary.Restricted, Entries: entries, Deny: deny, Protected: protected}
}

func sub(p string, a boundary.Access) boundary.Entry {
	return boundary.Entry{Path: p, Access: a, Match: boundary.Subtree}
}

func exact(p string, a boundary.Access) boundary.Entry {
	return boundary.Entry{Path: p, Access: a, Match: boundary.Exact}
}

// tempDir is t.TempDir with symlinks evaluated (boundary paths are lexical; /tmp may itself be a link).
func tempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
