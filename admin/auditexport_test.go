package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/statetest"
)

// exportStore is a store whose trail holds one record of each kind the
// OCSF mapping treats apart, then call-admitted records up to n in all.
func exportStore(t *testing.T, n int) *admin.State {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := admin.OpenStore(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	recs := []api.AuditRecord{
		{Kind: admin.AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"rendered":"--message=hi","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`)},
		{Kind: admin.AuditFetch, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"method":"GET","host":"api.example.com","path":"/x","allowed":true,"status":200}`)},
		{Kind: admin.AuditFetch, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"method":"POST","host":"evil.example","allowed":false,"error":"denied"}`)},
		{Kind: admin.AuditCallSucceeded, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"rendered":"--message=hi","duration_ms":3,"tool_kind":"wasm","output_bytes":2,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`)},
		{Kind: admin.AuditCallRefused, Actor: "agent:b", Agent: "b", Tool: "echo", Body: json.RawMessage(`{"rendered":"","kind":"denied","message":"no card"}`)},
		{Kind: admin.AuditCallFailed, Actor: "agent:a", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"rendered":"","kind":"deadline","message":"timed out"}`)},
		{Kind: admin.AuditCardChange, Actor: "operator", Agent: "a", Body: json.RawMessage(`{"op":"grant","card":"crd_1"}`)},
		{Kind: admin.AuditCardChange, Actor: "operator", Agent: "a", Body: json.RawMessage(`{"op":"revoke","card":"crd_1","revoked":1}`)},
		{Kind: admin.AuditTokenChange, Actor: "operator", Agent: "a", Body: json.RawMessage(`{"op":"mint","token":"tok_1"}`)},
		{Kind: admin.AuditApproval, Actor: "cli:root", Agent: "a", Tool: "echo", Body: json.RawMessage(`{"request":"apr_1"}`)},
		{Kind: "session-opened", Actor: "agent:a", Agent: "a", Body: json.RawMessage(`{"session":"s"}`)},
	}
	for i := len(recs); i < n; i++ {
		recs = append(recs, api.AuditRecord{Kind: admin.AuditCallAdmitted, Actor: "agent:a", Agent: "a", Tool: "t" + strconv.Itoa(i+1), Body: json.RawMessage(`{"rendered":""}`)})
	}
	statetest.AppendAudit(t, path, recs...)
	st, err = admin.OpenStore(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestExportAuditStreamResumes: the streamed JSON-lines export, read a
// few records at a time, is the whole export (which VerifyExport checks
// against the chain), and one resumed from record 11 holds records 11..25
// with the first one's prev the hash of record 10, and the same head.
func TestExportAuditStreamResumes(t *testing.T) {
	ctx := context.Background()
	st := exportStore(t, 25)
	var whole, old bytes.Buffer
	h, err := st.ExportAuditStream(ctx, &whole, admin.ExportOptions{Page: 4})
	if err != nil || h.Records != 25 || h.From != 1 || h.Last != 25 {
		t.Fatalf("export: %+v, %v", h, err)
	}
	if n, head, err := admin.VerifyExport(bytes.NewReader(whole.Bytes()), ""); err != nil || n != 25 || head != h.Head {
		t.Fatalf("VerifyExport: %d %s %v (head %s)", n, head, err, h.Head)
	}
	if _, oldHead, err := st.ExportAudit(ctx, &old); err != nil || oldHead != h.Head {
		t.Fatalf("the one-read export's head %s, the stream's %s (%v)", oldHead, h.Head, err)
	}
	wholeLines := strings.Split(strings.TrimSpace(whole.String()), "\n")
	oldLines := strings.Split(strings.TrimSpace(old.String()), "\n")
	if !slices.Equal(wholeLines[:25], oldLines[:25]) {
		t.Errorf("the streamed records differ from the one-read export's")
	}

	var part bytes.Buffer
	p, err := st.ExportAuditStream(ctx, &part, admin.ExportOptions{From: 11, Page: 4})
	if err != nil {
		t.Fatal(err)
	}
	var rec10 api.AuditRecord
	if err := json.Unmarshal([]byte(wholeLines[9]), &rec10); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(part.String()), "\n")
	if p.Records != 15 || p.From != 11 || p.Last != 25 || p.Head != h.Head || p.Prev != rec10.Hash || len(lines) != 16 || !slices.Equal(lines[:15], wholeLines[10:25]) {
		t.Errorf("resumed from 11: %+v, %d lines; want 15 records 11..25 after %s, head %s", p, len(lines), rec10.Hash, h.Head)
	}
	var head admin.ExportHead
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &head); err != nil || head != p {
		t.Errorf("head line %q, want %+v", lines[len(lines)-1], p)
	}
	var none bytes.Buffer
	if e, err := st.ExportAuditStream(ctx, &none, admin.ExportOptions{From: 26}); err != nil || e.Records != 0 {
		t.Errorf("past the end: %+v, %v", e, err)
	}
	if _, err := st.ExportAuditStream(ctx, &none, admin.ExportOptions{Format: "cef"}); err == nil {
		t.Error("an unknown format was accepted")
	}
}

// ocsfRequired is testdata/ocsf/required-1.8.0.json: what OCSF 1.8.0
// requires of the classes the export writes (gen.py says where it came
// from).
type ocsfRequired struct {
	Version string `json:"version"`
	Classes map[string]struct {
		CategoryUID int      `json:"category_uid"`
		Required    []string `json:"required"`
	} `json:"classes"`
	Objects map[string]struct {
		Required   []string `json:"required"`
		AtLeastOne []string `json:"at_least_one"`
	} `json:"objects"`
	AttributeObjects map[string]string `json:"attribute_objects"`
}

// TestOCSFExportHasTheSchemasRequiredFields: every event of the OCSF
// export is of a class the schema file lists, has each attribute that
// class requires, its objects' required attributes and one of each
// at_least_one set, the type_uid the schema defines (class_uid * 100 +
// activity_id), the class's category, the schema version named, and the
// record's number, prev and hash; calls and fetches are API Activity,
// card and token changes User Access Management.
func TestOCSFExportHasTheSchemasRequiredFields(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "ocsf", "required-1.8.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema ocsfRequired
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Version != admin.OCSFVersion {
		t.Fatalf("the schema file is OCSF %s, the export names %s", schema.Version, admin.OCSFVersion)
	}
	st := exportStore(t, 12)
	var out bytes.Buffer
	h, err := st.ExportAuditStream(context.Background(), &out, admin.ExportOptions{Format: admin.ExportOCSF, Page: 5})
	if err != nil || h.Records != 12 {
		t.Fatalf("export: %+v, %v", h, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d lines, want 12 events and no head line", len(lines))
	}
	classOf := map[string]float64{}
	prev := strings.Repeat("0", 64)
	for i, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		for _, p := range ocsfProblems(schema, ev) {
			t.Errorf("event %d (%s): %s", i+1, l, p)
		}
		um, _ := ev["unmapped"].(map[string]any)
		md, _ := ev["metadata"].(map[string]any)
		if md["sequence"] != float64(i+1) || um["maiden_prev"] != prev || md["uid"] != um["maiden_hash"] {
			t.Errorf("event %d: sequence %v, prev %v (want %s), uid %v", i+1, md["sequence"], um["maiden_prev"], prev, md["uid"])
		}
		prev, _ = um["maiden_hash"].(string)
		classOf[fmt.Sprint(um["maiden_kind"], " ", ev["activity_id"])] = ev["class_uid"].(float64)
	}
	if prev != h.Head {
		t.Errorf("the last event's hash %s, the head %s", prev, h.Head)
	}
	for kind, class := range map[string]float64{"call-admitted 99": 6003, "fetch 99": 6003, "call-succeeded 99": 6003, "card-change 1": 3005, "card-change 2": 3005, "token-change 1": 3005, "session-opened 99": 6003} {
		if classOf[kind] != class {
			t.Errorf("%s: class %v, want %v (%v)", kind, classOf[kind], class, classOf)
		}
	}
	var first map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	if tr, _ := first["trace"].(map[string]any); tr["uid"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the call's trace: %v", first["trace"])
	}
}

// ocsfProblems lists what ev lacks of what schema requires.
func ocsfProblems(schema ocsfRequired, ev map[string]any) []string {
	var out []string
	class := fmt.Sprint(ev["class_uid"])
	c, ok := schema.Classes[class]
	if !ok {
		return []string{"class_uid " + class + " is not a class the schema file lists"}
	}
	present := func(m map[string]any, k string) bool {
		v, ok := m[k]
		switch v := v.(type) {
		case nil:
			return false
		case string:
			return v != ""
		case []any:
			return len(v) > 0
		case map[string]any:
			return len(v) > 0
		}
		return ok
	}
	for _, k := range c.Required {
		if !present(ev, k) {
			out = append(out, "required attribute "+k+" missing")
		}
	}
	if ev["category_uid"] != float64(c.CategoryUID) {
		out = append(out, fmt.Sprintf("category_uid %v, want %d", ev["category_uid"], c.CategoryUID))
	}
	if cu, a := ev["class_uid"].(float64), ev["activity_id"].(float64); ev["type_uid"] != cu*100+a {
		out = append(out, fmt.Sprintf("type_uid %v, want %v", ev["type_uid"], cu*100+a))
	}
	if md, _ := ev["metadata"].(map[string]any); md["version"] != schema.Version {
		out = append(out, fmt.Sprintf("metadata.version %v, want %s", md["version"], schema.Version))
	}
	for path, obj := range schema.AttributeObjects {
		var v any = ev
		for _, k := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		m, ok := v.(map[string]any)
		if !ok {
			continue // not written (or not an object): the class's list says whether it must be
		}
		o := schema.Objects[obj]
		for _, k := range o.Required {
			if !present(m, k) {
				out = append(out, path+"."+k+" missing ("+obj+" requires it)")
			}
		}
		if len(o.AtLeastOne) > 0 && !slices.ContainsFunc(o.AtLeastOne, func(k string) bool { return present(m, k) }) {
			out = append(out, fmt.Sprintf("%s has none of %v (%s needs one)", path, o.AtLeastOne, obj))
		}
	}
	return out
}
