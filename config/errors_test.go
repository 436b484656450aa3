package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"full", &Error{File: "agent.toml", Line: 7, Key: "tools.weather.memory_mb", Msg: "must be an integer in 1..4096, got 0"},
			"agent.toml:7: tools.weather.memory_mb: must be an integer in 1..4096, got 0"},
		{"no line", &Error{File: "agent.toml", Key: "version", Msg: "required key is missing"},
			"agent.toml: version: required key is missing"},
		{"no key", &Error{File: "agent.toml", Line: 3, Msg: "syntax error at column 1: boom"},
			"agent.toml:3: syntax error at column 1: boom"},
		{"no file", &Error{Line: 3, Key: "k", Msg: "m"}, ":3: k: m"},
		{"nothing but a message", &Error{Msg: "m"}, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
				t.Errorf("Error() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorsUnwrap(t *testing.T) {
	first := &Error{File: "a.toml", Line: 1, Key: "version", Msg: "unsupported version 2; supported versions: 1"}
	second := &Error{File: "a.toml", Line: 4, Key: "tools.x.path", Msg: "file not found: \"x.wasm\""}
	var err error = Errors{first, second}

	want := "a.toml:1: version: unsupported version 2; supported versions: 1\n" +
		"a.toml:4: tools.x.path: file not found: \"x.wasm\""
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Error() mismatch (-want +got):\n%s", diff)
	}
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("errors.As(Errors) = %v, %d errors; want true, 2", errors.As(err, &errs), len(errs))
	}
	var one *Error
	if !errors.As(err, &one) || one != first {
		t.Errorf("errors.As(*Error) found %v, want the first error", one)
	}
	if !errors.Is(err, second) {
		t.Error("errors.Is does not find the second error")
	}
}
