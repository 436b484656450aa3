package trace

import "testing"

// TestTraceID: only a well-formed W3C traceparent names a trace; a
// malformed one (which the call's spans then do not join either) names
// none, so an audit record never carries a made-up ID.
func TestTraceID(t *testing.T) {
	const id = "4bf92f3577b34da6a3ce929d0e0e4736"
	for in, want := range map[string]string{
		"00-" + id + "-00f067aa0ba902b7-01":                       id,
		" 00-" + id + "-00f067aa0ba902b7-00 ":                     id,
		"01-" + id + "-00f067aa0ba902b7-01-future":                id, // a later version may add fields
		"00-" + id + "-00f067aa0ba902b7-01-extra":                 "", // version 00 has exactly four
		"ff-" + id + "-00f067aa0ba902b7-01":                       "", // version ff is invalid
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "", // the invalid all-zero trace
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "", // upper case is not W3C's
		"00-" + id + "-00f067aa0ba902b7":                          "",
		"00-" + id[:30] + "zz-00f067aa0ba902b7-01":                "",
		"": "",
	} {
		if got := TraceID(in); got != want {
			t.Errorf("TraceID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPropagates: traceparent goes only to the hosts listed, by the same
// matching as http_allow (a wildcard is one label), and nowhere by default.
func TestPropagates(t *testing.T) {
	var off *Tracer
	if off.Propagates("api.example.com") {
		t.Error("a nil tracer propagates")
	}
	tr := &Tracer{}
	if tr.Propagates("api.example.com") {
		t.Error("propagates with no list")
	}
	if _, err := New(nil, &Options{PropagateTo: []string{"https://x"}}); err != nil {
		t.Error("a nil provider is tracing off, whatever the list")
	}
	tr = &Tracer{propagate: []string{"api.example.com", "*.internal.example"}}
	for host, want := range map[string]bool{"api.example.com": true, "a.internal.example": true, "a.b.internal.example": false, "internal.example": false, "evil.com": false, "api.example.com.evil.com": false} {
		if got := tr.Propagates(host); got != want {
			t.Errorf("Propagates(%q) = %v, want %v", host, got, want)
		}
	}
}
