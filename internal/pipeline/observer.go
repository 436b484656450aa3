package pipeline

import "github.com/maiden-run/maiden/api"

// Observer watches calls on their way through the pipeline: admission,
// how each call ended, every http-fetch decision (api.Observer, which says
// what each event holds and how it must behave). Set it in
// Options.Observer; nil costs one nil check at each point.
type Observer = api.Observer

// AdmissionEvent is a change in admission (api.AdmissionEvent).
type AdmissionEvent = api.AdmissionEvent

// CallEvent is how one call ended (api.CallEvent).
type CallEvent = api.CallEvent

// FetchEvent is the decision on one http-fetch request (api.FetchEvent).
type FetchEvent = api.FetchEvent

// callDone reports a finished call to the observer.
func (h *Host) callDone(inv *invocation, err error) {
	ev := CallEvent{OK: inv.res.OK, Err: err, Duration: inv.res.Duration}
	if inv.res.Error != nil {
		ev.Kind = inv.res.Error.Kind
	}
	// policy.resolve set inv.cfg if the name is a tool's; a call that
	// ended before it (overloaded, cancelled while waiting) is looked up.
	if inv.cfg != nil {
		ev.Tool = inv.call.Tool
	} else if _, ok := h.cfg.Load().Tool(inv.call.Tool); ok {
		ev.Tool = inv.call.Tool
	}
	h.opts.Observer.CallDone(ev)
}
