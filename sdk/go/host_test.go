//go:build !wasip1

package maiden_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// recordingHost is a stand-in host for tests on the development machine.
type recordingHost struct {
	logs []string
	reqs []maiden.Request
	resp maiden.Response
	err  error
}

func (h *recordingHost) Log(level maiden.Level, msg string) {
	h.logs = append(h.logs, level.String()+": "+msg)
}

func (h *recordingHost) Fetch(req maiden.Request) (maiden.Response, error) {
	h.reqs = append(h.reqs, req)
	return h.resp, h.err
}

func TestDefaultHostDenies(t *testing.T) {
	_, err := maiden.Fetch(maiden.Request{URL: "https://example.com/"})
	if !errors.Is(err, maiden.ErrDenied) || errors.Is(err, maiden.ErrFailed) {
		t.Errorf("err = %v, want a denial", err)
	}
}

func TestSetHost(t *testing.T) {
	h := &recordingHost{resp: maiden.Response{Status: 200, Header: maiden.Headers{{Name: "A", Value: "b"}}, Body: []byte("ok")}}
	restore := maiden.SetHost(h)
	maiden.Log(maiden.LevelWarn, "careful")
	maiden.Logf(maiden.LevelInfo, "n=%d", 3)
	maiden.Log(maiden.Level(9), "bad \xff level")
	resp, err := maiden.Fetch(maiden.Request{URL: "https://api.test/", Credential: "TOKEN"})
	restore()
	if err != nil || resp.Status != 200 || string(resp.Body) != "ok" || resp.Header.Get("a") != "b" {
		t.Errorf("Fetch = %+v, %v", resp, err)
	}
	want := []string{"warn: careful", "info: n=3", "error: bad \uFFFD level"}
	if strings.Join(h.logs, "|") != strings.Join(want, "|") {
		t.Errorf("logs %q, want %q", h.logs, want)
	}
	if len(h.reqs) != 1 || h.reqs[0].Credential != "TOKEN" {
		t.Errorf("requests %+v", h.reqs)
	}
	// Restored: the default host again.
	if _, err := maiden.Fetch(maiden.Request{URL: "https://api.test/"}); !errors.Is(err, maiden.ErrDenied) {
		t.Errorf("after restore: %v", err)
	}
}

func TestFetchRejectsInvalidUTF8(t *testing.T) {
	h := &recordingHost{}
	defer maiden.SetHost(h)()
	for _, req := range []maiden.Request{
		{URL: "https://a.test/\xff"},
		{URL: "https://a.test/", Method: "G\xffT"},
		{URL: "https://a.test/", Header: maiden.Headers{{Name: "X", Value: "\xff"}}},
		{URL: "https://a.test/", Credential: "\xff"},
	} {
		_, err := maiden.Fetch(req)
		var fe *maiden.FetchError
		if err == nil || errors.As(err, &fe) || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("Fetch(%+v) = %v, want a UTF-8 error", req, err)
		}
	}
	if len(h.reqs) != 0 {
		t.Errorf("the host saw %d requests", len(h.reqs))
	}
}

type input struct {
	Name string `json:"name"`
}

func TestFunc(t *testing.T) {
	tool := maiden.Func("Greets.", func(ctx context.Context, in input) (map[string]string, error) {
		if in.Name == "" {
			return nil, errors.New("name is required")
		}
		return map[string]string{"greeting": "Hello, " + in.Name + "!"}, nil
	})
	if tool.Describe() != "Greets." {
		t.Errorf("Describe = %q", tool.Describe())
	}
	if got := tool.Schema(); got != `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}` {
		t.Errorf("Schema = %s", got)
	}
	for _, tt := range []struct{ in, out, err string }{
		{`{"name":"Ada"}`, `{"greeting":"Hello, Ada!"}`, ""},
		{`{}`, "", "name is required"},
		{`{"name":1}`, "", "invalid input: json: cannot unmarshal number into Go struct field input.name of type string"},
	} {
		out, err := tool.Execute(context.Background(), []byte(tt.in))
		if string(out) != tt.out || (err == nil) != (tt.err == "") || (err != nil && err.Error() != tt.err) {
			t.Errorf("Execute(%s) = %s, %v; want %s, %s", tt.in, out, err, tt.out, tt.err)
		}
	}
}

func TestSourceCoversPackage(t *testing.T) {
	entries, err := maiden.Source.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// Every non-test file of the package except source.go itself must be
	// vendored by `maiden new go`, or the copy would not build.
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have := strings.Join(names, " ")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "source.go" {
			continue
		}
		if !strings.Contains(" "+have+" ", " "+f+" ") {
			t.Errorf("%s is not in the //go:embed list of source.go", f)
		}
	}
}
