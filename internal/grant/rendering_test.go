package grant

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseRendering: a rendering reads back to exactly the arguments it
// was made of, whatever their values hold (spaces, line breaks, quotes,
// backslashes, '*', bidi controls, text that looks like another argument).
func TestParseRendering(t *testing.T) {
	for _, input := range []string{
		`{}`,
		`{"path":"notes.txt"}`,
		`{"content":"hi` + strings.Repeat(`\n`, 40) + ` --path=.bashrc","path":"notes.txt"}`,
		`{"memo":"pay \u202eyrollam","to":"alice"}`,
		`{"a":"x\r\u001b[2Ky","b":"\"quoted\" \\back* --c=d","c":["", " ", "..."],"d":true,"e":false,"no-f":true,"g":null,"h":{"k":[1,2]},"i":1e21,"*":"=","x=y":"--"}`,
	} {
		args, err := Render([]byte(input))
		if err != nil {
			t.Fatalf("Render(%s): %v", input, err)
		}
		r := Rendering(args)
		got, err := ParseRendering(r)
		if err != nil {
			t.Fatalf("ParseRendering(%q): %v", r, err)
		}
		if len(args) == 0 {
			args = nil
		}
		if !reflect.DeepEqual(got.Args, args) || got.Command != nil || got.Positionals != nil {
			t.Errorf("ParseRendering(%q) = %#v, want %#v", r, got, args)
		}
	}
	cmd := []string{"remote", "add"}
	args := []Arg{{Name: "force", Form: FormTrue}, {Name: "m", Value: "a b\nc"}}
	pos := []string{"origin", "--x=1", "...", "a*b", ""}
	r := CommandRendering(cmd, args, pos)
	got, err := ParseRendering(r)
	if err != nil {
		t.Fatalf("ParseRendering(%q): %v", r, err)
	}
	if want := (Call{Command: cmd, Args: args, Positionals: pos}); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseRendering(%q) = %#v, want %#v", r, got, want)
	}
	for _, bad := range []string{`--a=x*`, `--a=1 --...`, `-- a*`, `"--a=unclosed`, `--=x`, `--a=1 loose`} {
		if c, err := ParseRendering(bad); err == nil {
			t.Errorf("ParseRendering(%q) = %#v, want an error", bad, c)
		}
	}
}
