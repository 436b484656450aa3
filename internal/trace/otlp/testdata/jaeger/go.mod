// The Jaeger all-in-one (v2) the tracing test sends spans to, pinned here so
// that its dependencies never become maiden's (testkit.ModuleBinary builds
// github.com/jaegertracing/jaeger/cmd/jaeger from this module).
module github.com/maiden-run/maiden/internal/trace/otlp/testdata/jaeger

go 1.26.8

require github.com/jaegertracing/jaeger v1.76.0

// As Jaeger's own go.mod: its Kafka client is pinned there by a replace,
// which a module requiring Jaeger must repeat.
replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0
