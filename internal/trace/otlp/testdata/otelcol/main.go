// Command otelcol is the smallest OpenTelemetry Collector the tracing test
// needs: the collector's own OTLP receiver (HTTP and gRPC) feeding the
// collector's own debug exporter, which writes every span it receives, with
// its IDs, parent and attributes, to a file the test reads back. Both are
// created from their factories with their configuration decoded by the
// collector's confmap, as the collector's service does; what is left out is
// the service itself (otelcol.NewCommand: its pipelines graph, its own
// telemetry's SDK, OTLP and Prometheus exporters, its resource detectors),
// which doubled the build for nothing the test reads. Its module pins every
// collector module at one release, so its dependencies never become
// maiden's; testkit's ModuleBinary builds it.
//
// Usage: otelcol -spans FILE. It listens on 127.0.0.1 ports the kernel
// picks and says where in its log on stderr (the receiver's "Starting HTTP
// server" / "Starting GRPC server" lines), then "Everything is ready. Begin
// running and processing data." (the collector's own words), and runs
// until SIGTERM or SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

func main() {
	spans := flag.String("spans", "", "the file the debug exporter writes the spans it receives to")
	flag.Parse()
	if *spans == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: otelcol -spans FILE")
		os.Exit(2)
	}
	if err := run(*spans); err != nil {
		fmt.Fprintln(os.Stderr, "otelcol:", err)
		os.Exit(1)
	}
}

func run(spans string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	logCfg := zap.NewProductionConfig()
	logCfg.Sampling = nil
	logCfg.OutputPaths, logCfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	logger, err := logCfg.Build()
	if err != nil {
		return err
	}
	defer func() { _ = logger.Sync() }()
	telemetry := component.TelemetrySettings{
		Logger:         logger,
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  noop.NewMeterProvider(),
	}
	info := component.BuildInfo{Command: "otelcol", Description: "maiden's test collector: OTLP in, the debug exporter out", Version: "0.165.0"}

	// The debug exporter at detailed verbosity, to the file, its sending
	// queue off: the receiver acknowledges an export only once the spans
	// are written, so the sender's acknowledgement is the event a test
	// waits on.
	expFactory := debugexporter.NewFactory()
	expCfg := expFactory.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{
		"verbosity":           "detailed",
		"use_internal_logger": false,
		"output_paths":        []any{spans},
		"sampling_initial":    1000000,
		"sending_queue":       map[string]any{"enabled": false},
	}).Unmarshal(expCfg); err != nil {
		return fmt.Errorf("the debug exporter's configuration: %w", err)
	}
	if err := confmap.Validate(expCfg); err != nil {
		return fmt.Errorf("the debug exporter's configuration: %w", err)
	}
	exp, err := expFactory.CreateTraces(ctx, exporter.Settings{
		ID: component.NewID(expFactory.Type()), TelemetrySettings: telemetry, BuildInfo: info,
	}, expCfg)
	if err != nil {
		return err
	}

	// The OTLP receiver, both protocols on loopback ports of the kernel's
	// choosing (its log names them), its traces consumed by the exporter.
	recFactory := otlpreceiver.NewFactory()
	recCfg := recFactory.CreateDefaultConfig()
	if err := confmap.NewFromStringMap(map[string]any{
		"protocols": map[string]any{
			"http": map[string]any{"endpoint": "127.0.0.1:0"},
			"grpc": map[string]any{"endpoint": "127.0.0.1:0"},
		},
	}).Unmarshal(recCfg); err != nil {
		return fmt.Errorf("the OTLP receiver's configuration: %w", err)
	}
	if err := confmap.Validate(recCfg); err != nil {
		return fmt.Errorf("the OTLP receiver's configuration: %w", err)
	}
	rec, err := recFactory.CreateTraces(ctx, receiver.Settings{
		ID: component.NewID(recFactory.Type()), TelemetrySettings: telemetry, BuildInfo: info,
	}, recCfg, exp)
	if err != nil {
		return err
	}

	// Started as the service starts a pipeline: the exporter before the
	// receiver that feeds it; shut down the other way round.
	var h host
	if err := exp.Start(ctx, h); err != nil {
		return fmt.Errorf("starting the debug exporter: %w", err)
	}
	defer func() { _ = exp.Shutdown(context.Background()) }()
	if err := rec.Start(ctx, h); err != nil {
		return fmt.Errorf("starting the OTLP receiver: %w", err)
	}
	defer func() { _ = rec.Shutdown(context.Background()) }()
	logger.Info("Everything is ready. Begin running and processing data.")
	<-ctx.Done()
	logger.Info("Shutting down")
	return nil
}

// host is the component.Host the service would be: this collector has no
// extensions (no authenticator, no middleware) for a component to look up.
type host struct{}

func (host) GetExtensions() map[component.ID]component.Component { return nil }
