package main

import (
	"context"
	"net/http"

	"github.com/maiden-run/maiden/metrics"
)

// serveMetrics is the Observer behind /metrics for serve -http at addr;
// nil for stdio, which has no listener to serve it on.
func serveMetrics(addr string) *metrics.Metrics {
	if addr == "" {
		return nil
	}
	return metrics.New()
}

// monitorHandlers are the paths serve -http answers beside /mcp, behind
// the same Origin and token checks: /healthz (200 while serving, 503 once
// ctx ends and the server shuts down) and /metrics (Prometheus text).
func monitorHandlers(ctx context.Context, mx *metrics.Metrics) map[string]http.Handler {
	return map[string]http.Handler{
		"/healthz": metrics.Health(ctx),
		"/metrics": mx.Handler(),
	}
}
