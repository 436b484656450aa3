package api

import "time"

// Observer watches calls on their way through the pipeline: how many wait
// for a turn and how many run, how each call ended and how long it took,
// and every http-fetch decision. It is the seam for metrics (maiden serve's
// Prometheus metrics, package metrics, are one Observer) and for anything
// else that only needs to watch; a policy that decides (approval, quotas)
// is a pipeline stage, not an Observer.
//
// Set it in maiden.Options.Observer; nil, the default, costs one nil check at each
// point and builds no event. The methods are called synchronously on the
// call's own path, concurrently from many calls (Fetch from the goroutine
// that serves the tool's request), so they must be safe for concurrent
// use, return quickly and never block or call back into the Host. Events
// carry names, kinds and durations: never a tool's input, output, logs or a
// secret.
type Observer interface {
	// Admission reports a change in the number of calls waiting for a
	// turn and the number holding one (see AdmissionEvent). Summing the
	// changes gives both numbers at any moment.
	Admission(AdmissionEvent)
	// CallDone reports how a call ended, once for every Host.Call on an
	// open host, after its last Admission event.
	CallDone(CallEvent)
	// Fetch reports the decision on one http-fetch request, as the audit
	// event for it records it.
	Fetch(FetchEvent)
}

// AdmissionEvent is a change in admission (Options.MaxConcurrent and
// MaxQueued): Queued and Running are each -1, 0 or +1. A call that finds a
// free turn is {Running: +1}; one that must wait is {Queued: +1}, then
// {Queued: -1, Running: +1} when it gets its turn or {Queued: -1} when its
// context ends first; every {Running: +1} is followed by {Running: -1}
// when the call gives its turn back. A call refused with ErrOverloaded
// never waits and has no Admission event.
type AdmissionEvent struct {
	Queued, Running int
}

// CallEvent is how one call ended.
type CallEvent struct {
	// Tool is the tool's name if the configuration in force defines it,
	// else "": the name comes from the caller, and leaving unknown names
	// out keeps what an observer records (a metric's labels) bounded.
	Tool string
	// OK is true when the tool ran and succeeded (Result.OK).
	OK bool
	// Kind is the failure's kind when the tool's call failed (Result.Error
	// is set); "" otherwise.
	Kind ErrorKind
	// Err is set when the call could not be made: ErrOverloaded,
	// ErrUnknownTool, ErrClosed, the caller's context error, or a host
	// failure (Host.Call's error).
	Err error
	// Duration is the call's wall time, waiting for a turn included
	// (Result.Duration).
	Duration time.Duration
}

// FetchEvent is the decision on one http-fetch request.
type FetchEvent struct {
	// Tool is the calling tool's name (always one the configuration
	// defines).
	Tool string
	// Allowed is false when the policy refused the request and nothing
	// was sent.
	Allowed bool
	// Rule names the rule that decided, as in the audit event: a denial's
	// rule ("allowlist", "port", "loopback", "credential-missing",
	// "credential-destination", and for a declared agent's cards
	// "network-card" and "secret-card", ...) or,
	// for an allowed request, its outcome: "allowed" when a response came
	// back, else what went wrong ("timeout", "too-large", "failed", ...).
	Rule string
}
