package jsonschema

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// scanInputs are inputs for ScanInput and ValidateScanned: valid ones of
// several shapes, ones past the input limits (depth, numbers), and ones
// ParseStrict refuses.
func scanInputs() []string {
	deep := func(d int) string { return `{"a":` + strings.Repeat("[", d-1) + strings.Repeat("]", d-1) + `}` }
	items := `[` + strings.TrimSuffix(strings.Repeat(`{"id":123,"ok":true,"tag":"abc"},`, 200), ",") + `]`
	return []string{
		`{}`, `{"message":"hi"}`, `{"message":"m","data":` + items + `}`, `{"message":7}`, `{"a":1}`,
		`{"a":"xy"}`, `{"a":"x"}`, `{"a":[1,2]}`, `{"a":[]}`, `{"a":[1,2,3]}`, `{"a":["1"]}`, `{"a":null,"b":1}`,
		`{"a":{"x":null}}`, `{"a":{"x":1}}`, `{"a":{}}`, `{"a":true,"b":false}`, `{"a":1,"b":2,"c":3}`,
		`{"a":{"x":1.0,"y":[2,{"z":null}]}}`, `{"a":{"x":1,"y":[2,{"z":null}]}}`, `{"a":2}`, `{"a":1e0}`,
		`{"a":"\u00e9\n"}`, ` { "message" : "a\"b" } `, `[1,2]`, `"s"`, `null`, `12`,
		deep(maxInputDepth), deep(maxInputDepth + 1), `{"message":"m","n":1e1001}`, `{"n":[` + strings.Repeat("9", 1001) + `]}`,
		`{"message":"m","a":{"message":1e2000}}`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":1} x`, `{"a":`, ``,
	}
}

// TestScanInputAgreesWithCheckInput: ScanInput refuses what ParseStrict
// refuses, with its error, and for the rest finds an input past the limits
// exactly when checkInput does, and measures it as checkInput does.
func TestScanInputAgreesWithCheckInput(t *testing.T) {
	for _, in := range scanInputs() {
		checkScanInput(t, in)
	}
}

func checkScanInput(t *testing.T, in string) {
	t.Helper()
	sc, err := ScanInput(in)
	v, perr := jsonparse.ParseStrict(in)
	if (err == nil) != (perr == nil) || err != nil && err.Error() != perr.Error() {
		t.Fatalf("ScanInput(%q): %v; ParseStrict: %v", in, err, perr)
	}
	if err != nil {
		return
	}
	var size inputSize
	cerr := checkInput(v, &size)
	if sc.Problem != (cerr != nil) {
		t.Fatalf("ScanInput(%q): problem %v; checkInput: %v", in, sc.Problem, cerr)
	}
	if cerr == nil && (sc.Nodes != size.nodes || sc.Bytes != size.bytes) { // checkInput stops at a problem
		t.Fatalf("ScanInput(%q): %d nodes %d bytes; checkInput %+v", in, sc.Nodes, sc.Bytes, size)
	}
}

// FuzzScanInput holds ScanInput to ParseStrict and checkInput.
//
//	go test -run '^$' -fuzz FuzzScanInput ./internal/jsonschema/
func FuzzScanInput(f *testing.F) {
	for _, in := range scanInputs() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkScanInput(t, in)
	})
}

// TestValidateScannedAgrees: the scanned path (ValidateScanned: the fast
// check on the members, the text decoded only when needed) and the full
// path (ParseStrict, then Validate) give the same verdict and the same
// message, for every plain schema and schemas without a fast form, on
// valid and invalid inputs, inline and on a goroutine.
func TestValidateScannedAgrees(t *testing.T) {
	schemas := append([]string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}}`, // no fast form
		`{"type":"object","const":{"a":1}}`,                                     // const at the top: decoded
		`{"type":"object","enum":[{"a":1},{"a":2}]}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"],"additionalProperties":{"type":"string"}}`,
	}, plainSchemas...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a Done channel: long validations go to a goroutine
	for _, sch := range schemas {
		s := mustCompile(t, sch)
		for _, in := range scanInputs() {
			sc, err := ScanInput(in)
			if err != nil {
				continue
			}
			v, decoded, got := s.ValidateScanned(ctx, 0, in, &sc)
			want := s.Validate(ctx, 0, mustParse(t, in))
			if got != nil && want != nil && got.Error() != want.Error() {
				// The library lists some problems in map order: the
				// message of another run of the full path must do.
				for range 50 {
					if want = s.Validate(ctx, 0, mustParse(t, in)); want.Error() == got.Error() {
						break
					}
				}
			}
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Errorf("schema %s, input %.80q: scanned %v; full %v", sch, in, got, want)
			}
			if decoded && !jsonEqual(v, mustParse(t, in)) {
				t.Errorf("schema %s, input %.80q: decoded %v", sch, in, v)
			}
		}
	}
}

// TestValidateScannedDecodesOnlyWhatItReads: for echo's schema, many small
// objects beside "message" are not decoded: no value comes back, and the
// check allocates little.
func TestValidateScannedDecodesOnlyWhatItReads(t *testing.T) {
	s := mustCompile(t, plainSchemas[0])
	in := `{"message":"m","data":[` + strings.TrimSuffix(strings.Repeat(`{"id":123,"ok":true,"tag":"abc"},`, 3000), ",") + `]}`
	sc, err := ScanInput(in)
	if err != nil {
		t.Fatal(err)
	}
	_, decoded, err := s.ValidateScanned(context.Background(), 0, in, &sc)
	if err != nil || decoded {
		t.Fatalf("decoded %v, %v", decoded, err)
	}
	n := testing.AllocsPerRun(20, func() { s.ValidateScanned(context.Background(), 0, in, &sc) })
	if n > 20 {
		t.Fatalf("%v allocations", n)
	}
}

// TestFastMembersCountsAsFits: the members' fast check charges the work
// fits charges on the decoded object, so the work limit falls where it
// did (TestFastCountsWork).
func TestFastMembersCountsAsFits(t *testing.T) {
	schemas := append([]string{objectSchema(`"a":{"type":"array","items":{"enum":` + numbers(64) + `}}`)}, plainSchemas...)
	for _, sch := range schemas {
		s := mustCompile(t, sch)
		if s.fast == nil {
			t.Fatalf("%s: no fast form", sch)
		}
		for _, in := range scanInputs() {
			sc, err := ScanInput(in)
			if err != nil || !sc.Object {
				continue
			}
			full := fastWalk{checks: 6, limit: maxChecks, stop: new(atomic.Bool)}
			members := full
			fitsFull := s.fast.fits(mustParse(t, in), &full)
			fitsMembers := s.fast.fitsMembers(sc.Members, &members)
			if fitsMembers && (!fitsFull || members.checks != full.checks) {
				t.Errorf("schema %s, input %.80q: members %v after %d checks; fits %v after %d", sch, in, fitsMembers, members.checks, fitsFull, full.checks)
			}
		}
	}
	// Over the limit: refused by both paths with the library's message.
	s := mustCompile(t, schemas[0])
	in := `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", 250000), ",") + `]}`
	sc, err := ScanInput(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ValidateScanned(context.Background(), 0, in, &sc); err == nil || !strings.Contains(err.Error(), "over the limit of 2000000 checks") {
		t.Fatalf("got %v", err)
	}
}
