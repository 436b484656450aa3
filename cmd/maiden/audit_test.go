package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/maiden-run/maiden/admin"
	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/statetest"
)

// auditStore makes a state store at a new path holding n audit records
// (tools t1..tn) and returns its path.
func auditStore(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := admin.OpenStore(context.Background(), path, nil) // the store, even with no record
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	appendRecords(t, path, 1, n)
	return path
}

// appendRecords appends call-admitted records from..to to the trail of the
// store at path, as calls do.
func appendRecords(t *testing.T, path string, from, to int) {
	t.Helper()
	var recs []api.AuditRecord
	for i := from; i <= to; i++ {
		recs = append(recs, api.AuditRecord{Kind: admin.AuditCallAdmitted, Actor: "agent:a", Agent: "a",
			Tool: "t" + strconv.Itoa(i), Body: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
	}
	statetest.AppendAudit(t, path, recs...)
}

// TestAuditVerifyTampered edits a store file with the sqlite3 command-line
// shell, as someone holding the file would; audit verify then exits 1
// naming the first bad record and what was done (the same edits as
// internal/store's TestAuditTamperWithSQLiteCLI, through the command).
func TestAuditVerifyTampered(t *testing.T) {
	t.Parallel()
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatal("the sqlite3 command-line shell is needed (Debian package sqlite3; make test installs it, see scripts/deps)")
	}
	path := auditStore(t, 6)
	r := cli(t, "", "audit", "verify", "-state", path)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "ok: 6 records\nhead: ") || len(strings.TrimPrefix(r.stdout, "ok: 6 records\nhead: ")) != 65 {
		t.Fatalf("intact: %+v", r)
	}
	for _, tc := range []struct{ name, sql, want string }{
		{"edit", `UPDATE audit SET tool = 'evil' WHERE seq = 3`, "record 3 edited"},
		{"edit the body", `UPDATE audit SET body = '{"i":99}' WHERE seq = 5`, "record 5 edited"},
		{"delete", `DELETE FROM audit WHERE seq = 3`, "record 3 deleted"},
		{"insert", `UPDATE audit SET seq = seq + 100 WHERE seq >= 4; UPDATE audit SET seq = seq - 99 WHERE seq >= 104;
			INSERT INTO audit (seq, at, kind, actor, agent, tool, body, prev, hash)
			SELECT 4, at, 'call-admitted', 'operator', 'a', 'forged', body, hash, hash FROM audit WHERE seq = 3`, "record 4 inserted"},
		{"reorder", `UPDATE audit SET seq = -1 WHERE seq = 3; UPDATE audit SET seq = 3 WHERE seq = 4; UPDATE audit SET seq = 4 WHERE seq = -1`, "record 3 reordered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := auditStore(t, 6)
			if out, err := exec.Command(sqlite, path, tc.sql).CombinedOutput(); err != nil {
				t.Fatalf("sqlite3: %v: %s", err, out)
			}
			r := cli(t, "", "audit", "verify", "-state", path)
			if r.code != exitState || r.stdout != "" || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, path) {
				t.Fatalf("audit verify after %q: exit %d, stdout %q, stderr %q; want exit 1 naming %q", tc.sql, r.code, r.stdout, r.stderr, tc.want)
			}
			t.Logf("%s: %s", tc.name, strings.TrimSpace(r.stderr))
		})
	}
}

// TestAuditMissingStore: a store file that is not there is an error (a
// deleted store must not verify as an empty trail), and creates nothing.
func TestAuditMissingStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gone.db")
	for _, sub := range []string{"verify", "tail", "export"} {
		r := cli(t, "", "audit", sub, "-state", path)
		if r.code != exitState || !strings.Contains(r.stderr, "no state store at "+path) {
			t.Errorf("audit %s of a missing store: %+v", sub, r)
		}
	}
	if m, _ := filepath.Glob(path + "*"); len(m) != 0 {
		t.Errorf("audit created %v", m)
	}
	// Without -state the store is agent.toml's; a bad agent.toml is exit 2.
	if r := cli(t, "", "audit", "verify", "-config", filepath.Join(t.TempDir(), "none.toml")); r.code != exitUsage {
		t.Errorf("audit verify without an agent.toml: %+v", r)
	}
	cfg, state := approvalsConfig(t)
	if r := cli(t, "", "audit", "verify", "-config", cfg); r.code != exitState || !strings.Contains(r.stderr, state) {
		t.Errorf("audit verify of agent.toml's missing store: %+v", r)
	}
}

// TestAuditTailAndExport: tail prints the last records (20, or -n) as text
// or JSON lines; export writes JSON lines and a head line that verify on
// their own and end at the head audit verify printed.
func TestAuditTailAndExport(t *testing.T) {
	t.Parallel()
	path := auditStore(t, 25)
	r := cli(t, "", "audit", "tail", "-state", path)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != exitOK || len(lines) != 20 {
		t.Fatalf("audit tail: exit %d, %d lines:\n%s%s", r.code, len(lines), r.stdout, r.stderr)
	}
	for i, l := range lines {
		seq := 6 + i
		f := strings.Fields(l)
		if len(f) < 8 || f[0] != strconv.Itoa(seq) || f[3] != "call-admitted" || f[4] != "agent:a" || f[5] != "a" ||
			f[6] != "t"+strconv.Itoa(seq) || f[7] != `{"i":`+strconv.Itoa(seq)+`}` {
			t.Errorf("line %d: %q", i, l)
		}
	}
	r = cli(t, "", "audit", "tail", "-state", path, "-n", "3", "-json")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != exitOK || len(lines) != 3 {
		t.Fatalf("audit tail -n 3 -json: %+v", r)
	}
	for i, l := range lines {
		var rec api.AuditRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Seq != int64(23+i) || rec.Tool != "t"+strconv.Itoa(23+i) || len(rec.Hash) != 64 || len(rec.Prev) != 64 {
			t.Errorf("json line %d: %q (%v)", i, l, err)
		}
	}
	if r := cli(t, "", "audit", "tail", "-state", path, "-n", "0"); r.code != exitOK || r.stdout != "" {
		t.Errorf("-n 0: %+v", r)
	}
	if r := cli(t, "", "audit", "tail", "-state", path, "-n", "-1"); r.code != exitUsage {
		t.Errorf("-n -1: %+v", r)
	}
	if r := cli(t, "", "audit", "tail", "-state", auditStore(t, 0)); r.code != exitOK || r.stdout != "" {
		t.Errorf("tail of an empty trail: %+v", r)
	}

	v := cli(t, "", "audit", "verify", "-state", path)
	head := strings.TrimSpace(strings.TrimPrefix(v.stdout, "ok: 25 records\nhead: "))
	e := cli(t, "", "audit", "export", "-state", path)
	if e.code != exitOK || e.stderr != "exported 25 records (1..25), head "+head+"\n" {
		t.Fatalf("export: exit %d, stderr %q (verify said %q)", e.code, e.stderr, v.stdout)
	}
	n, h, err := admin.VerifyExport(strings.NewReader(e.stdout), head)
	if err != nil || n != 25 || h != head {
		t.Fatalf("VerifyExport of audit export: %d %s %v", n, h, err)
	}
	// A record edited in the export no longer verifies.
	forged := strings.Replace(e.stdout, `"tool":"t7"`, `"tool":"t8"`, 1)
	if _, _, err := admin.VerifyExport(strings.NewReader(forged), head); err == nil {
		t.Fatal("an edited export verified")
	}

	// Resumed from record 20: records 20..25, the same head; as OCSF, one
	// event per record and the head on stderr.
	r20 := cli(t, "", "audit", "export", "-state", path, "-from", "20")
	if l := strings.Split(strings.TrimSpace(r20.stdout), "\n"); r20.code != exitOK || len(l) != 7 || !strings.HasPrefix(l[0], `{"seq":20,`) ||
		r20.stderr != "exported 6 records (20..25), head "+head+"\n" {
		t.Errorf("export -from 20: %+v", r20)
	}
	o := cli(t, "", "audit", "export", "-state", path, "-format", "ocsf", "-from", "24")
	if l := strings.Split(strings.TrimSpace(o.stdout), "\n"); o.code != exitOK || len(l) != 2 || !strings.Contains(l[0], `"class_uid":6003`) ||
		!strings.Contains(l[1], `"maiden_hash":"`+head+`"`) || !strings.Contains(l[0], `"version":"`+admin.OCSFVersion+`"`) {
		t.Errorf("export -format ocsf -from 24: %+v", o)
	}
	for _, bad := range [][]string{{"-format", "cef"}, {"-from", "-1"}} {
		if r := cli(t, "", append([]string{"audit", "export", "-state", path}, bad...)...); r.code != exitUsage {
			t.Errorf("export %v: %+v", bad, r)
		}
	}
}

// TestAuditVerifyHead: the chain has no key, so records cut off its end
// still verify; -head checks that the trail extends a head noted earlier,
// in the store and in an export (-export, no store, no agent.toml).
func TestAuditVerifyHead(t *testing.T) {
	t.Parallel()
	sqlite, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Fatal("the sqlite3 command-line shell is needed (Debian package sqlite3; make test installs it, see scripts/deps)")
	}
	path := auditStore(t, 6)
	v := cli(t, "", "audit", "verify", "-state", path)
	noted := strings.TrimSpace(strings.TrimPrefix(v.stdout, "ok: 6 records\nhead: "))
	if v.code != exitOK || len(noted) != 64 {
		t.Fatalf("verify: %+v", v)
	}
	appendRecords(t, path, 7, 9)
	if r := cli(t, "", "audit", "verify", "-state", path, "-head", noted); r.code != exitOK || !strings.HasPrefix(r.stdout, "ok: 9 records\n") {
		t.Fatalf("verify -head of a trail that grew since: %+v", r)
	}
	export := filepath.Join(t.TempDir(), "trail.jsonl")
	e := cli(t, "", "audit", "export", "-state", path)
	if err := os.WriteFile(export, []byte(e.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "audit", "verify", "-export", export, "-head", noted); r.code != exitOK || !strings.HasPrefix(r.stdout, "ok: 9 records\n") {
		t.Fatalf("verify -export -head: %+v", r)
	}

	// The last five records cut off: the rest verifies on its own, and
	// -head says the trail no longer extends the noted head.
	if out, err := exec.Command(sqlite, path, `DELETE FROM audit WHERE seq > 4`).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	if r := cli(t, "", "audit", "verify", "-state", path); r.code != exitOK || !strings.HasPrefix(r.stdout, "ok: 4 records\n") {
		t.Fatalf("verify of the cut trail, without -head: %+v (a cut trail verifies on its own)", r)
	}
	r := cli(t, "", "audit", "verify", "-state", path, "-head", noted)
	if r.code != exitState || r.stdout != "" || !strings.Contains(r.stderr, "no record has the head "+noted) || !strings.Contains(r.stderr, "cut or rewritten") {
		t.Fatalf("verify -head of the cut trail: %+v; want exit 1 naming the head", r)
	}
	cut := cli(t, "", "audit", "export", "-state", path)
	if err := os.WriteFile(export, []byte(cut.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli(t, "", "audit", "verify", "-export", export, "-head", noted); r.code != exitState || !strings.Contains(r.stderr, "no record of the export has the expected head "+noted) {
		t.Fatalf("verify -export -head of the cut trail's export: %+v", r)
	}
	for _, bad := range [][]string{{"-head", "abc"}, {"-head", strings.ToUpper(noted)}, {"-export", export, "-state", path}, {"-export", export, "-provenance"}} {
		if r := cli(t, "", append([]string{"audit", "verify"}, bad...)...); r.code != exitUsage {
			t.Errorf("verify %v: %+v, want exit 2", bad, r)
		}
	}
}

// TestAuditTailEscapesAgentText: a record's fields hold what an agent
// sent (its arguments as rendered, a session name, an upstream's error
// text). Neither tail's table nor its -json lines pass a bidirectional
// override, a zero-width character or a C1 control (U+009B is CSI to a
// terminal that reads 8-bit controls) raw to the operator's terminal:
// the table escapes them as the other commands do, and -json writes them
// as \u escapes (the same JSON value, as every other -json output of
// maiden does; audit export keeps the bytes as hashed).
func TestAuditTailEscapesAgentText(t *testing.T) {
	t.Parallel()
	path := auditStore(t, 0)
	evil := "hi\x1b[2J\u202edenied\u200b\u009b[31m\u2066"
	body, err := json.Marshal(map[string]string{"rendered": evil})
	if err != nil {
		t.Fatal(err)
	}
	statetest.AppendAudit(t, path, api.AuditRecord{Kind: admin.AuditCallRefused, Actor: "agent:a", Agent: "a", Tool: "t\u202e", Body: body})
	raws := []string{"\x1b", "\u202e", "\u200b", "\u009b", "\u2066"}
	text := cli(t, "", "audit", "tail", "-state", path)
	j := cli(t, "", "audit", "tail", "-state", path, "-json")
	if text.code != exitOK || j.code != exitOK {
		t.Fatalf("audit tail: %+v %+v", text, j)
	}
	for _, raw := range raws {
		if strings.Contains(text.stdout, raw) {
			t.Errorf("the table passes %q raw: %q", raw, text.stdout)
		}
		if strings.Contains(j.stdout, raw) {
			t.Errorf("-json passes %q raw to the terminal: %q", raw, j.stdout)
		}
	}
	var rec api.AuditRecord
	var got map[string]string
	if err := json.Unmarshal([]byte(j.stdout), &rec); err != nil || rec.Tool != "t\u202e" || json.Unmarshal(rec.Body, &got) != nil || got["rendered"] != evil {
		t.Fatalf("-json must carry the same values: %q (%v)", j.stdout, err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAuditTailFollow: tail -f prints records another store handle (as
// another process would) appends after it started, in order, each once,
// and returns 0 when its context ends (SIGINT in main).
func TestAuditTailFollow(t *testing.T) {
	defer func(n int) { auditTailPage = n }(auditTailPage)
	auditTailPage = 2 // new records come in pages of two
	path := auditStore(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"audit", "tail", "-f", "-json", "-state", path}, strings.NewReader(""), &out, &errb)
	}()
	waitFor := func(n int) []api.AuditRecord {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := out.String()
			if strings.Count(s, "\n") >= n || time.Now().After(deadline) {
				var recs []api.AuditRecord
				for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
					var r api.AuditRecord
					if l != "" && json.Unmarshal([]byte(l), &r) == nil {
						recs = append(recs, r)
					}
				}
				return recs
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if recs := waitFor(2); len(recs) != 2 || recs[1].Seq != 2 {
		t.Fatalf("tail -f's first lines: %+v (stderr %q)", recs, errb.String())
	}
	appendRecords(t, path, 3, 9)
	recs := waitFor(9)
	var seqs []int64
	for _, r := range recs {
		seqs = append(seqs, r.Seq)
	}
	if want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(seqs, want) {
		t.Fatalf("tail -f printed seqs %v, want %v", seqs, want)
	}
	time.Sleep(3 * auditTailPoll) // nothing is printed twice
	if got := strings.Count(out.String(), "\n"); got != 9 {
		t.Fatalf("tail -f printed %d lines, want 9:\n%s", got, out.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("tail -f exit %d after cancel: %s", code, errb.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tail -f did not return after its context ended")
	}
}
