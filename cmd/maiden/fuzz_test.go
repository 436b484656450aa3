package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCompleteArgs: any words typed (the shell hands them over as they
// are) get an answer, never a panic, and word candidates extend the word.
func FuzzCompleteArgs(f *testing.F) {
	for _, s := range []string{"", "serve -isolation=", "client config cursor -url", "new go x -- -add", "call -config", "help client config", "--", "-=", "serve --=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words := strings.Fields(line)
		if strings.HasSuffix(line, " ") || len(words) == 0 {
			words = append(words, "")
		}
		c := completeArgs(words)
		cur := words[len(words)-1]
		for _, w := range c.words {
			if c.kind == completeWords && !strings.HasPrefix(w.word, cur) {
				t.Errorf("%q: candidate %q does not extend %q", line, w.word, cur)
			}
		}
	})
}

// FuzzClientMerge: whatever a client's config file holds, -write either
// refuses and leaves it byte for byte, or writes a JSON object that holds
// the entry and every top-level key that was there.
func FuzzClientMerge(f *testing.F) {
	for _, s := range []string{"", "{}", `{"mcpServers":{"a":{"command":"x"}},"k":[1,2.50]}`, `{"mcpServers":null}`, `{"mcpServers":[]}`, "[]", "{\n// c\n}", `{"a":1}{"b":2}`, `{"mcpServers":{"maiden":1,"maiden":2}}`, " \n\t"} {
		f.Add([]byte(s))
	}
	entry := mustJSON(stdioEntry{Command: "/bin/maiden", Args: []string{"serve"}})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := mergeClientFile(path, "mcpServers", "maiden", entry, nil, nil)
		got, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if !bytes.Equal(got, data) {
				t.Fatalf("refused (%v) but changed the file", err)
			}
			return
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("wrote invalid JSON: %v\n%s", err, got)
		}
		var servers map[string]json.RawMessage
		if err := json.Unmarshal(out["mcpServers"], &servers); err != nil || !jsonEqual(servers["maiden"], entry) {
			t.Fatalf("entry missing: %s", got)
		}
		var in map[string]json.RawMessage
		if json.Unmarshal(data, &in) == nil {
			for k, v := range in {
				if k != "mcpServers" && !jsonEqual(out[k], v) {
					t.Errorf("key %q changed: %s -> %s", k, v, out[k])
				}
			}
		}
	})
}
