package sandbox

import (
	"fmt"
	"strings"

	"github.com/maiden-run/maiden/internal/wasmscan"
	"github.com/maiden-run/maiden/internal/wasmtime"
	"github.com/maiden-run/maiden/wit"
)

// wasiPackages are the WASI 0.2 packages a tool may import. The store's WASI
// context is empty, so these grant nothing: no files, environment, arguments
// or network. They are allowed because every real toolchain's runtime imports
// them (clocks for timers, random for hash seeds, filesystem types even with
// no preopens, cli for stdio that maiden captures into the log).
//
// wasi:sockets and wasi:http are not here: a tool's only road to the network
// is maiden's http-fetch, and refusing them at load makes that structural.
var wasiPackages = []string{"wasi:cli/", "wasi:clocks/", "wasi:filesystem/", "wasi:io/", "wasi:random/"}

// checkImports refuses a component that imports anything outside the
// contract: maiden's host interface (any version in wit.Contracts) and the
// WASI packages above at 0.2.x.
func checkImports(imports []wasmtime.Item) error {
	for _, imp := range imports {
		if !importAllowed(imp.Name) {
			return fmt.Errorf("%w: it imports %q, which maiden does not provide (a tool may import %s and the WASI 0.2 cli, clocks, filesystem, io and random interfaces)",
				ErrInvalidTool, imp.Name, hostInterfaces())
		}
		if imp.Kind != wasmtime.ItemInstance {
			return fmt.Errorf("%w: import %q is a %s, expected an interface", ErrInvalidTool, imp.Name, imp.Kind)
		}
	}
	return nil
}

func importAllowed(name string) bool {
	for _, c := range wit.Contracts {
		if name == c.HostInterface {
			return true
		}
	}
	for _, p := range wasiPackages {
		if rest, ok := strings.CutPrefix(name, p); ok {
			_, version, ok := strings.Cut(rest, "@")
			return ok && strings.HasPrefix(version, "0.2.")
		}
	}
	return false
}

// The worlds a component can implement. A component that exports handle
// and not execute is middleware (maiden:middleware@0.1.0); any other is held
// to the tool world.
const (
	WorldTool       = "tool"
	WorldMiddleware = "middleware"
)

// worldOf tells which world a component's exports claim.
func worldOf(exports []wasmtime.Item) string {
	names := make([]string, len(exports))
	for i, e := range exports {
		names[i] = e.Name
	}
	return worldOfNames(names)
}

func worldOfNames(exports []string) string {
	var handle, execute bool
	for _, e := range exports {
		switch e {
		case wit.HandleExport:
			handle = true
		case wit.ExecuteExport:
			execute = true
		}
	}
	if handle && !execute {
		return WorldMiddleware
	}
	return WorldTool
}

// WorldOf tells which world a component's bytes claim, WorldTool or
// WorldMiddleware, by the same rule as Open, without compiling them (it
// reads the top-level exports with wasmscan). A worker's parent, which never
// compiles guest code, learns the world this way rather than from a worker;
// maiden build uses it to check a middleware as one. Errors wrap
// ErrInvalidTool.
func WorldOf(wasm []byte) (string, error) {
	names, err := wasmscan.Exports(wasm)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidTool, err)
	}
	return worldOfNames(names), nil
}

// checkMiddlewareImports refuses a middleware component that imports
// anything but maiden:middleware/host and the WASI packages a tool may
// import (which grant nothing: the store's WASI context is empty). In
// particular a middleware gets no http-fetch: it has no network at all.
func checkMiddlewareImports(imports []wasmtime.Item) error {
	for _, imp := range imports {
		allowed := imp.Name == wit.Middleware.HostInterface
		for _, p := range wasiPackages {
			if rest, ok := strings.CutPrefix(imp.Name, p); ok {
				_, version, ok := strings.Cut(rest, "@")
				allowed = ok && strings.HasPrefix(version, "0.2.")
			}
		}
		if !allowed {
			what := "which maiden does not provide to middleware"
			for _, c := range wit.Contracts {
				if imp.Name == c.HostInterface {
					what = "the tool host interface, whose http-fetch reaches the network"
				}
			}
			return fmt.Errorf("%w: middleware has no network: it imports %q, %s (a middleware may import only %s and the WASI 0.2 cli, clocks, filesystem, io and random interfaces)",
				ErrInvalidTool, imp.Name, what, wit.Middleware.HostInterface)
		}
		if imp.Kind != wasmtime.ItemInstance {
			return fmt.Errorf("%w: import %q is a %s, expected an interface", ErrInvalidTool, imp.Name, imp.Kind)
		}
	}
	return nil
}

var middlewareExports = []export{
	{"describe", nil, "string"},
	{wit.HandleExport, []string{"string"}, "result<string, string>"},
}

// checkMiddlewareExports makes sure describe and handle exist with the
// types of maiden:middleware@0.1.0.
func checkMiddlewareExports(exports []wasmtime.Item) error {
	byName := map[string]wasmtime.Item{}
	for _, e := range exports {
		byName[e.Name] = e
	}
	var problems []string
	for _, want := range middlewareExports {
		got, ok := byName[want.name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("missing export %q (want %s)", want.name, want.signature()))
		case got.Kind != wasmtime.ItemFunc:
			problems = append(problems, fmt.Sprintf("export %q is a %s, want %s", want.name, got.Kind, want.signature()))
		case !equalStrings(got.Params, want.params) || got.Result != want.result:
			problems = append(problems, fmt.Sprintf("export %q has type %s, want %s", want.name, got.Type, want.signature()))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s (a middleware must target world %s of %s)", ErrInvalidTool, strings.Join(problems, "; "), wit.MiddlewareWorld, wit.Middleware.Package)
	}
	return nil
}

// export is one function the contract requires.
type export struct {
	name   string
	params []string
	result string
}

var requiredExports = []export{
	{"describe", nil, "string"},
	{"schema", nil, "string"},
	{"execute", []string{"string"}, "result<string, string>"},
}

// outputSchemaExport is the export maiden:tool@0.2.0 added. A 0.1.0 tool
// lacks it; when present it must have this type.
var outputSchemaExport = export{wit.OutputSchemaExport, nil, "string"}

// hostInterfaces names every host interface version, for messages.
func hostInterfaces() string {
	var names []string
	for _, c := range wit.Contracts {
		names = append(names, c.HostInterface)
	}
	return strings.Join(names, " or ")
}

func (e export) signature() string {
	return fmt.Sprintf("%s: func(%s) -> %s", e.name, strings.Join(e.params, ", "), e.result)
}

// checkExports makes sure the three functions maiden calls exist with the
// contract's types, so a wrong tool is refused at load with a message naming
// the function rather than failing on every call. output-schema (0.2.0) is
// optional, since 0.1.0 tools lack it, but checked when present.
func checkExports(exports []wasmtime.Item) error {
	byName := map[string]wasmtime.Item{}
	for _, e := range exports {
		byName[e.Name] = e
	}
	var problems []string
	for _, want := range requiredExports {
		got, ok := byName[want.name]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("missing export %q (want %s)", want.name, want.signature()))
		case got.Kind != wasmtime.ItemFunc:
			problems = append(problems, fmt.Sprintf("export %q is a %s, want %s", want.name, got.Kind, want.signature()))
		case !equalStrings(got.Params, want.params) || got.Result != want.result:
			problems = append(problems, fmt.Sprintf("export %q has type %s, want %s", want.name, got.Type, want.signature()))
		}
	}
	if got, ok := byName[outputSchemaExport.name]; ok && (got.Kind != wasmtime.ItemFunc || len(got.Params) != 0 || got.Result != outputSchemaExport.result) {
		problems = append(problems, fmt.Sprintf("export %q has type %s, want %s", outputSchemaExport.name, got.Type, outputSchemaExport.signature()))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s (the tool must target world %s of %s or %s)", ErrInvalidTool, strings.Join(problems, "; "), wit.World, wit.V020.Package, wit.V010.Package)
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// hasOutputSchema tells whether a component (checked by checkExports)
// exports output-schema, i.e. was built against maiden:tool@0.2.0 or later.
// A 0.1.0 tool declares no output schema.
func hasOutputSchema(exports []wasmtime.Item) bool {
	for _, e := range exports {
		if e.Name == outputSchemaExport.name {
			return true
		}
	}
	return false
}
