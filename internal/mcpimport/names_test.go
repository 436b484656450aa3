package mcpimport_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/mcpimport"
)

func TestSanitizeName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"echo", "echo"},
		{"get-sum", "get-sum"},
		{"read_file", "read_file"},
		{"getSum", "get_sum"},
		{"HTTPGet", "httpget"},
		{"list2Files", "list2_files"},
		{"Echo", "echo"},
		{"search.docs", "search_docs"},
		{"a  b//c", "a_b_c"},
		{"_private", "private"},
		{"--x", "x"},
		{"über", "ber"},
		{"日本", ""},
		{"...", ""},
		{"", ""},
		{strings.Repeat("a", 70), strings.Repeat("a", 64)},
		{"9lives", "9lives"},
	} {
		if got := mcpimport.SanitizeName(tc.in); got != tc.want {
			t.Errorf("SanitizeName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestExposedNames(t *testing.T) {
	got, errs := mcpimport.ExposedNames(
		[]string{"echo", "getSum", "get_sum", "read.file", "Read_File", "日本", "fetch", "fetch", "ok"},
		map[string]string{"日本": "japan", "ok": "Not Valid"})
	want := map[string]string{"echo": "echo", "japan": "日本"}
	if len(got) != len(want) {
		t.Errorf("exposed %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("exposed[%q] = %q, want %q", k, got[k], v)
		}
	}
	// Every refused tool is named, with why, in upstream-name order.
	var refused []string
	for _, err := range errs {
		var ne *mcpimport.NameError
		if !errors.As(err, &ne) {
			t.Fatalf("%T %v", err, err)
		}
		refused = append(refused, ne.Upstream)
	}
	wantRefused := []string{"Read_File", "fetch", "getSum", "get_sum", "ok", "read.file"}
	if strings.Join(refused, ",") != strings.Join(wantRefused, ",") {
		t.Errorf("refused %v, want %v\n%v", refused, wantRefused, errs)
	}
	for _, err := range errs {
		msg := err.Error()
		var ne *mcpimport.NameError
		errors.As(err, &ne)
		switch ne.Upstream {
		case "getSum":
			if !strings.Contains(msg, `collides with upstream tool "get_sum"`) {
				t.Errorf("collision message %q", msg)
			}
		case "ok":
			if !strings.Contains(msg, `"Not Valid"`) {
				t.Errorf("bad rename message %q", msg)
			}
		case "fetch":
			if !strings.Contains(msg, "lists it 2 times") {
				t.Errorf("duplicate message %q", msg)
			}
		}
	}
	// A rename resolves a collision.
	got, errs = mcpimport.ExposedNames([]string{"getSum", "get_sum"}, map[string]string{"getSum": "sum2"})
	if len(errs) != 0 || got["sum2"] != "getSum" || got["get_sum"] != "get_sum" {
		t.Errorf("rename: %v %v", got, errs)
	}
	// The outcome does not depend on the order the upstream lists tools.
	a, _ := mcpimport.ExposedNames([]string{"x.y", "x_y", "z"}, nil)
	b, _ := mcpimport.ExposedNames([]string{"z", "x_y", "x.y"}, nil)
	if len(a) != 1 || len(b) != 1 || a["z"] != "z" || b["z"] != "z" {
		t.Errorf("order-dependent: %v vs %v", a, b)
	}
}

// FuzzSanitizeName: the result is empty or follows maiden's rule, and is a
// fixed point (sanitising it again changes nothing).
func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{"echo", "getSum", "a.b", "日本", "--", "A1b2C3", strings.Repeat("Ab", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := mcpimport.SanitizeName(s)
		if got == "" {
			return
		}
		if !mcpimport.ValidName(got) {
			t.Fatalf("SanitizeName(%q) = %q breaks the rule", s, got)
		}
		if again := mcpimport.SanitizeName(got); again != got {
			t.Fatalf("not a fixed point: %q → %q → %q", s, got, again)
		}
	})
}
