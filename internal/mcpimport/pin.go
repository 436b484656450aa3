package mcpimport

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Pin is what an operator accepted of an upstream tool: the title,
// description and input schema an agent is shown and maiden checks calls
// against, and their digest. The host keeps pins (in maiden-pins.json) and
// refuses a tool whose Pin no longer has the accepted digest: an upstream
// can change its tools at any time (notifications/tools/list_changed, a
// restart), and a widened schema or a rewritten description must not reach
// agents without an operator's word.
type Pin struct {
	Name        string          `json:"upstream_name"` // the upstream's own name
	Digest      string          `json:"digest"`        // "sha256:" + hex, of the canonical form
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"` // canonical JSON
}

// PinOf is t's pin: its input schema in canonical form (object keys
// sorted, no insignificant space, numbers as the upstream wrote them) and
// the SHA-256 of the canonical JSON of {title, description, input_schema}.
// Every byte of the title and description counts, invisible ones included.
func PinOf(t Tool) Pin {
	p := Pin{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: Canonical(t.InputSchema)}
	b, _ := json.Marshal(struct {
		Title       string          `json:"title"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}{p.Title, p.Description, p.InputSchema})
	sum := sha256.Sum256(b)
	p.Digest = "sha256:" + hex.EncodeToString(sum[:])
	return p
}

// Canonical returns the canonical JSON of a JSON value: objects' keys
// sorted, no insignificant whitespace, numbers kept as written. A value
// that does not parse is returned compacted if it can be, else as is (its
// digest then covers its bytes).
func Canonical(raw json.RawMessage) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err == nil && !d.More() {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if e.Encode(v) == nil {
			return bytes.TrimRight(b.Bytes(), "\n")
		}
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.Bytes()
	}
	return append(json.RawMessage{}, raw...)
}

// Changes names what differs between an accepted pin and the current one:
// "input schema", "description", "title" (in that order); nil when the
// digests agree.
func (p Pin) Changes(now Pin) []string {
	if p.Digest == now.Digest {
		return nil
	}
	var out []string
	if !bytes.Equal(Canonical(p.InputSchema), Canonical(now.InputSchema)) {
		out = append(out, "input schema")
	}
	if p.Description != now.Description {
		out = append(out, "description")
	}
	if p.Title != now.Title {
		out = append(out, "title")
	}
	if len(out) == 0 { // a pin written by hand or by another version
		out = append(out, "definition")
	}
	return out
}
