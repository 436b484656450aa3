package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyExportRefusesNonCanonicalLines: an export line verifies only
// in the exact form ExportAudit writes. encoding/json matches keys case-
// insensitively and lets the last duplicate win, so a line carrying a
// second, differently-cased "body" (or agent, tool, kind...) would verify
// against the hashed value while every other JSON reader (jq, Python,
// JavaScript, a SIEM) reads the first, planted one: the export "verifies"
// and says something the chain never held.
func TestVerifyExportRefusesNonCanonicalLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), nil)
	if _, err := s.AppendAudit(ctx, AuditRecord{Kind: AuditCallAdmitted, Actor: "agent:mallory", Agent: "mallory", Tool: "shell",
		Body: json.RawMessage(`{"rendered":"shell rm -rf /srv/data"}`)}); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, 2, "t")
	var buf bytes.Buffer
	_, head, err := s.ExportAudit(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyExport(bytes.NewReader(buf.Bytes()), head); err != nil {
		t.Fatalf("the export as written: %v", err)
	}
	for _, c := range []struct{ name, old, new string }{
		// A benign body planted before the real one, which keeps its
		// hashed value under a key only encoding/json reads as "body".
		{"case-folded duplicate body", `"body":{"rendered":"shell rm -rf /srv/data"}`,
			`"body":{"rendered":"shell ls"},"BODY":{"rendered":"shell rm -rf /srv/data"}`},
		// The same for who did it.
		{"case-folded duplicate agent", `"agent":"mallory"`, `"agent":"alice","Agent":"mallory"`},
		// An exact duplicate: first-wins readers (gjson, many
		// streaming parsers) see the planted value.
		{"exact duplicate tool", `"tool":"shell"`, `"tool":"echo","tool":"shell"`},
		// A field no export has, which other readers may take for one.
		{"unknown field", `"kind":"call-admitted"`, `"kind":"call-admitted","note":"approved by alice"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(buf.String(), c.old) {
				t.Fatalf("the export has no %s", c.old)
			}
			forged := strings.Replace(buf.String(), c.old, c.new, 1)
			var probe map[string]any
			first, _, _ := strings.Cut(forged, "\n")
			if err := json.Unmarshal([]byte(first), &probe); err != nil {
				t.Fatal(err)
			}
			if _, _, err := VerifyExport(strings.NewReader(forged), head); !errors.Is(err, ErrAuditBroken) {
				t.Fatalf("an export whose first line reads, to any reader but encoding/json's struct decoding, as %v verified against the noted head: %v", probe, err)
			}
		})
	}
}
