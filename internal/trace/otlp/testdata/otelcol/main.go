// Command otelcol is the smallest OpenTelemetry Collector the tracing test
// needs, assembled the way the collector's builder (OCB) generates a
// distribution: the OTLP receiver (HTTP and gRPC) and the debug exporter,
// which writes every span it receives, with its IDs, parent and attributes,
// to a file the test reads back. Its module pins every collector module at
// one release, so its dependencies never become maiden's; testkit's
// ModuleBinary builds it.
package main

import (
	"context"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry"
	"go.uber.org/zap"
)

func main() {
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "maiden's test collector: OTLP in, the debug exporter out",
			Version:     "0.165.0",
		},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				// The collector requires a default scheme among the
				// providers; the test's config has no ${...} to expand.
				DefaultScheme: "file",
			},
		},
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol:", err)
		os.Exit(1)
	}
}

// factories is the distribution: one receiver, one exporter, and the
// collector's own telemetry, which the collector requires. OCB would put
// otelconftelemetry there, whose resource detectors bring in Kubernetes'
// client (a third of the build); the test needs only the collector's log,
// so its telemetry is a logger on stderr and no-op meter and tracer
// providers (the telemetry package's defaults).
func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{
		Receivers: receivers,
		Exporters: exporters,
		Telemetry: telemetry.NewFactory(
			func() component.Config { return &struct{}{} },
			telemetry.WithCreateLogger(stderrLogger),
		),
	}, nil
}

// stderrLogger is the collector's log, at info: the receiver's "Starting
// HTTP server" / "Starting GRPC server" lines name the addresses it
// listens on, and "Everything is ready" says the pipeline is up.
func stderrLogger(_ context.Context, set telemetry.LoggerSettings, _ component.Config) (*zap.Logger, component.ShutdownFunc, error) {
	cfg := zap.NewProductionConfig()
	cfg.Sampling = nil
	cfg.OutputPaths, cfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	build := func(c zap.Config, opts ...zap.Option) (*zap.Logger, error) { return c.Build(opts...) }
	if set.BuildZapLogger != nil { // the collector's own options (its log for errors at start)
		build = set.BuildZapLogger
	}
	logger, err := build(cfg)
	if err != nil {
		return nil, nil, err
	}
	return logger, func(context.Context) error { _ = logger.Sync(); return nil }, nil
}
