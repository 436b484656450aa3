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

// monitorHandlers are the paths serve -http answers beside /mcp: /healthz
// (200 "ok" while serving, 503 once ctx ends and the server shuts down; no
// credentials) and /metrics (Prometheus text; an operator's or a metrics
// token, never an agent's: mcpserver.HTTPOptions.Metrics).
func monitorHandlers(ctx context.Context, mx *metrics.Metrics) (health, mtx http.Handler) {
	return metrics.Health(ctx), mx.Handler()
}
