module github.com/maiden-run/maiden

go 1.26.8

require (
	github.com/bytecodealliance/wasmtime-go/v39 v39.0.1
	github.com/google/go-cmp v0.7.0
	github.com/pelletier/go-toml/v2 v2.4.3
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
)

require golang.org/x/text v0.14.0 // indirect
