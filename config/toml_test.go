package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// FuzzTreeMatchesGoTOML checks our TOML table rules (duplicate keys, tables
// redefined by headers, dotted keys or inline tables, arrays of tables)
// against go-toml's own decoder: a document is structurally valid for us
// exactly when go-toml can decode it.
func FuzzTreeMatchesGoTOML(f *testing.F) {
	files, err := filepath.Glob("testdata/*.toml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"[a.b]\n[a]\nb.c = 1\n",
		"a.b = 1\n[a]\n",
		"a = {b=1}\n[a.c]\n",
		"[[a]]\n[a.b]\n[[a]]\nb.c=1\n",
		"[a]\nb.c = 1\n[a.b.d]\n",
		"a = [1]\n[[a]]\n",
		"[fruit]\napple.color = 'red'\n[fruit.apple.texture]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root, errs, _, complete := parseDocument("agent.toml", data)
		if !complete || lenientTree(root) {
			return
		}
		var m map[string]any
		err := toml.Unmarshal(data, &m)
		if (len(errs) == 0) != (err == nil) {
			t.Fatalf("we report %q, go-toml reports %v, for:\n%s", errs, err, data)
		}
	})
}

// lenientTree reports whether the tree holds values whose contents the
// unstable parser does not check (dates, floats, oversized integers). The
// schema rejects those everywhere, so they do not matter for the comparison.
func lenientTree(n *tnode) bool {
	switch n.kind {
	case tableNode:
		for _, c := range n.keys {
			if lenientTree(c) {
				return true
			}
		}
	case arrayTablesNode:
		for _, c := range n.elems {
			if lenientTree(c) {
				return true
			}
		}
	case valueNode:
		return lenientValue(n.val)
	}
	return false
}

func lenientValue(v *tvalue) bool {
	switch v.kind {
	case unstable.Integer:
		_, err := parseInt(v.text)
		return err != nil
	case unstable.Float, unstable.LocalDate, unstable.LocalTime, unstable.LocalDateTime, unstable.DateTime:
		return true
	case unstable.Array:
		for _, e := range v.elems {
			if lenientValue(e) {
				return true
			}
		}
	case unstable.InlineTable:
		return lenientTree(v.table)
	}
	return false
}

func TestParseInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"+42", 42, true},
		{"1_000", 1000, true},
		{"0x7fff_ffff_ffff_ffff", 1<<63 - 1, true},
		{"0xDEADbeef", 0xdeadbeef, true},
		{"0o755", 0o755, true},
		{"0b1010", 10, true},
		{"-9223372036854775808", -1 << 63, true},
		{"9223372036854775808", 0, false},
		{"0x8000000000000000", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseInt(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseInt(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}
