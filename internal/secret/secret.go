// Package secret is a call's secret handles (issue 14, "Secrets as ...
// handles"). A WebAssembly tool's input may carry {"$secret": "NAME"}
// wherever the tool's schema allows a string, NAME being a secret the tool
// (as the agent's binding narrows it) may use. The host replaces it:
//
//   - for everything that decides about the call (authorization, middleware,
//     approvals, the audit trail) with the marker "$secret:NAME", so a grant
//     can name it (`tool:invoke t --token=$secret:GH_TOKEN`) and an approval
//     of the call stays the same call when it is asked again (Issue);
//   - for the tool alone, with a handle: "maiden-secret-handle:" and 128
//     random bits, issued for this one call (Handles.WithHandles).
//
// The tool passes the handle as http-fetch's credential (Fetch resolves it
// to NAME, and the gate applies the same checks as for a name: the tool's
// secrets, [secrets.NAME] destinations, the agent's secret:use card), or,
// built against maiden:tool@0.3.0, asks reveal for the value (Revealer),
// which needs the binding's reveal list and a secret:reveal card
// (internal/decide) and is audited either way. A handle of another call
// resolves to nothing. The package holds no Host: the root's secrets.go
// gives it the call's values, the secret lookup and the audit trail.
//
//	hs, doc, err := secret.Issue(input, tool.Secrets) // nil hs: no reference
//	run := hs.WithHandles(doc)                          // what the tool receives
package secret

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/egress"
	"github.com/maiden-run/maiden/internal/jsonschema"
)

// HandlePrefix starts every secret handle a tool receives.
const HandlePrefix = "maiden-secret-handle:"

// MarkerPrefix starts the marker that stands for {"$secret": "NAME"} in
// what decides about a call: its rendering for cards, middleware,
// approvals and the audit trail.
const MarkerPrefix = "$secret:"

// refKey is the one key of a secret reference in a tool's input.
const refKey = "$secret"

// Handles is one call's secret handles: issued by Issue, looked up by the
// call's http-fetch and reveal. A nil *Handles has none.
type Handles struct {
	byHandle map[string]string // handle → secret name
	byName   map[string]string // secret name → handle
	refs     []ref             // where the input had {"$secret": ...}, in order

	mu       sync.Mutex
	revealed map[string]string                   // name → value revealed to the tool
	extra    atomic.Pointer[func(string) string] // redacts the revealed values
}

// ref is one {"$secret": NAME} of the input, for messages.
type ref struct {
	pointer string // JSON pointer, "" for the whole input
	name    string
}

// Lookup resolves a handle of this call to its secret name.
func (hs *Handles) Lookup(handle string) (string, bool) {
	if hs == nil {
		return "", false
	}
	name, ok := hs.byHandle[handle]
	return name, ok
}

// AddRevealed makes the call's redactor hide value (as NAME) from now on.
func (hs *Handles) AddRevealed(name, value string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.revealed == nil {
		hs.revealed = map[string]string{}
	}
	hs.revealed[name] = value
	f := egress.ValueRedactor(maps.Clone(hs.revealed))
	hs.extra.Store(&f)
}

// Redactor is the call's redactor: base (the values of the tool's secrets
// as the gate looked them up at the call's start; nil: none), then every
// value revealed to the tool during the call, as it was revealed. A call
// without handles reveals nothing: its redactor is base, nil included.
func (hs *Handles) Redactor(base func(string) string) func(string) string {
	if hs == nil {
		return base
	}
	return func(s string) string {
		if base != nil {
			s = base(s)
		}
		if f := hs.extra.Load(); f != nil {
			s = (*f)(s)
		}
		return s
	}
}

// MayRefer tells whether an input's text can hold the key "$secret":
// literally, or spelt with a \u escape (JSON lets any character be one).
// Most inputs hold neither, and skip the walk.
func MayRefer(input string) bool {
	return strings.Contains(input, refKey) || strings.Contains(input, `\u`)
}

// Issue walks a parsed input for secret references. It returns nil (and
// doc unchanged) when there are none; otherwise the call's handles and the
// document with each reference replaced by its marker. A reference that is
// malformed or names a secret the tool may not use (secrets are the names
// it may) is an error naming its place.
func Issue(doc any, secrets []string) (*Handles, any, error) {
	var hs *Handles
	var walk func(v any, at string, depth int) (any, error)
	walk = func(v any, at string, depth int) (any, error) {
		if depth > jsonschema.MaxInputDepth {
			return v, nil // the schema check refuses an input this deep
		}
		switch v := v.(type) {
		case map[string]any:
			if r, isRef := v[refKey]; isRef {
				name, err := refName(v, r, at, secrets)
				if err != nil {
					return nil, err
				}
				if hs == nil {
					hs = &Handles{byHandle: map[string]string{}, byName: map[string]string{}}
				}
				if _, ok := hs.byName[name]; !ok {
					handle, err := newHandle()
					if err != nil {
						return nil, err
					}
					hs.byName[name], hs.byHandle[handle] = handle, name
				}
				hs.refs = append(hs.refs, ref{pointer: at, name: name})
				return MarkerPrefix + name, nil
			}
			for k, e := range v {
				r, err := walk(e, at+"/"+jsonschema.EscapePointer(k), depth+1)
				if err != nil {
					return nil, err
				}
				v[k] = r
			}
		case []any:
			for i, e := range v {
				r, err := walk(e, at+"/"+strconv.Itoa(i), depth+1)
				if err != nil {
					return nil, err
				}
				v[i] = r
			}
		}
		return v, nil
	}
	out, err := walk(doc, "", 1)
	if err != nil {
		return nil, doc, err
	}
	return hs, out, nil
}

// refName checks one {"$secret": ...} object.
func refName(obj map[string]any, r any, at string, secrets []string) (string, error) {
	where := jsonschema.Where(at)
	name, ok := r.(string)
	switch {
	case !ok:
		return "", fmt.Errorf(`input at %s: "$secret" must name a secret (a string), got %s`, where, jsonKind(r))
	case len(obj) != 1:
		keys := slices.Sorted(maps.Keys(obj))
		return "", fmt.Errorf(`input at %s: a secret reference is {"$secret": "NAME"} alone, but this object also has %s`, where, strings.Join(slices.DeleteFunc(keys, func(k string) bool { return k == refKey }), ", "))
	case !slices.Contains(secrets, name):
		return "", fmt.Errorf(`input at %s: {"$secret": %s}: not a secret this tool may use`, where, strconv.Quote(jsonschema.Truncate(name, 64)))
	}
	return name, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// newHandle is a fresh handle: 128 random bits.
func newHandle() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("no randomness for a secret handle: %w", err)
	}
	return HandlePrefix + hex.EncodeToString(b[:]), nil
}

// WithHandles returns a copy of doc in which every string that is the
// marker of a secret this call issued a handle for is that handle. A
// marker may have moved (a middleware's rewrite), so it is found by value,
// not by place; a marker the caller typed as text is treated like the
// reference it spells, which the same name check admitted.
func (hs *Handles) WithHandles(doc any) any {
	var walk func(v any, depth int) any
	walk = func(v any, depth int) any {
		if depth > jsonschema.MaxInputDepth {
			return v
		}
		switch v := v.(type) {
		case string:
			if name, ok := strings.CutPrefix(v, MarkerPrefix); ok {
				if handle, ok := hs.byName[name]; ok {
					return handle
				}
			}
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, e := range v {
				out[k] = walk(e, depth+1)
			}
			return out
		case []any:
			out := make([]any, len(v))
			for i, e := range v {
				out[i] = walk(e, depth+1)
			}
			return out
		}
		return v
	}
	return walk(doc, 1)
}

// Marshal encodes a parsed input (numbers as json.Number keep their text)
// without HTML escaping.
func Marshal(doc any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// ExplainSchemaProblem rewords a schema refusal at a place that held a
// secret reference: the tool's schema does not admit a string there.
func (hs *Handles) ExplainSchemaProblem(e *api.ToolError) {
	if e == nil || e.Kind != api.KindInput || !strings.HasPrefix(e.Message, "input does not match the tool's schema") {
		return
	}
	for _, r := range hs.refs {
		where := jsonschema.Where(r.pointer)
		if strings.Contains(e.Message, "at "+where+": ") {
			e.Message = fmt.Sprintf(`{"$secret": %q} at %s: the tool's schema does not admit a string there, so it cannot take a secret handle (%s)`, r.name, where, e.Message)
			return
		}
	}
}
