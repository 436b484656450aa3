//go:build !wasip1

package maiden

import "embed"

// Source holds this package's own source files (tests excluded), so that
// `maiden new go` can vendor the SDK into a new tool project without a
// module download: the maiden module is not published. Only in builds for
// GOOS other than wasip1, so tools do not carry it.
//
//go:embed doc.go tool.go command.go schema.go exactkeys.go abi.go abi_wasip1.go tool_wasip1.go middleware.go middleware_wasip1.go contract_wasip1.go contract010_wasip1.go preinit_wasip1.go host_other.go contract030_wasip1.go reveal.go reveal_abi.go reveal_other.go reveal_none_wasip1.go reveal030_wasip1.go
var Source embed.FS
