// jsonfield: bench/compare's workload "json" as a Go tool, built with the
// maiden SDK (the code is gotools.JSONField, which the native-go row also
// calls directly).
//
//	maiden build bench/compare/tools/jsonfield
package main

import (
	"github.com/maiden-run/maiden/bench/compare/tools/gotools"
	maiden "github.com/maiden-run/maiden/sdk/go"
)

func init() { maiden.Register(gotools.JSONField) }

func main() {}
