package egress

// The gate's own request and response types. They mirror what http-fetch
// carries, but belong to egress so that the gate depends on no runner: the
// sandbox (and later runners) adapt their values to these at the seam (the
// root package's egress.go).

// Header is one HTTP header, in the order the tool or server gave it.
type Header struct {
	Name, Value string
}

// Request is a tool's http-fetch request, as the tool wrote it: nothing in
// it has been checked.
type Request struct {
	Method  string
	URL     string
	Headers []Header
	Body    []byte
	// Credential is the name of a secret the tool asks the host to attach.
	Credential    string
	HasCredential bool
	// HeaderSecrets names secrets whose values the caller itself put in
	// Headers (a host-side built-in such as web_fetch attaching a
	// session's secret headers; never a tool, which has no values). Each
	// passes the same checks as Credential before anything is sent:
	// declared in the policy's Secrets, its [secrets.NAME] destinations,
	// and the caller's Authorize with that name.
	HeaderSecrets []string
	// Authorize, if not nil, is the caller's own authority over this
	// request (the root package fills it from the calling agent's permission
	// cards; the gate knows nothing of cards). It is asked once the policy
	// has allowed the request (URL, host, port, method, headers, the
	// credential's name and destination), before the credential's value is
	// checked and attached, and before any DNS lookup or byte is sent.
	Authorize Authorizer
	// Caller names who made the request (the calling agent), for the audit
	// event only; "" leaves it out. It grants nothing.
	Caller string
	// Redact, if not nil, hides values the gate did not look up itself
	// (a secret revealed to the tool during its call) in the audit event's
	// text the tool chose: the path, the credential's name and the reason.
	Redact func(string) string
}

// Authorizer decides one request on the caller's behalf: host is the
// normalised host the gate checked (an IP literal in canonical form), port
// the destination port, credential the secret name the request attaches
// ("" when none). A nil error allows it. An error refuses it as kind denied,
// audited and returned to the tool like the gate's own refusals: a
// [*Refusal] names its rule and reason; any other error is rule
// "authority" with the error's text as the reason. The reason must hold no
// secret value: it reaches the tool and the audit log unredacted.
type Authorizer func(host string, port int, credential string) error

// Refusal is an Authorizer's denial: a stable rule name (for audit events
// and counting) and one sentence saying what is missing.
type Refusal struct {
	Rule   string
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// Response is what the gate hands back for an allowed request: the status,
// the headers (valid UTF-8, redacted) and the capped, redacted body.
type Response struct {
	Status  int
	Headers []Header
	Body    []byte
}

// FetchErrorKind says why a request produced no response. The values are
// the cases of the WIT fetch-error variant.
type FetchErrorKind string

// Fetch error kinds.
const (
	FetchDenied   FetchErrorKind = "denied"    // the policy refused it; nothing was sent
	FetchTimeout  FetchErrorKind = "timeout"   // the call's deadline passed
	FetchTooLarge FetchErrorKind = "too-large" // the body is over the cap
	FetchFailed   FetchErrorKind = "failed"    // the exchange failed, or the response was refused
)

// FetchError is a refused or failed request, returned to the tool as a
// value. Message (for denied and failed) is valid UTF-8 and has passed the
// redactor: it may quote what the server sent.
type FetchError struct {
	Kind    FetchErrorKind
	Message string
	// Rule is the rule that decided, as in the audit event: a denial's rule
	// (Kind denied) or the outcome of an allowed request (timeout,
	// too-large, failed, ...). Stable names, for counting refusals.
	Rule string
}

func (e *FetchError) Error() string {
	if e.Message == "" {
		return string(e.Kind)
	}
	return string(e.Kind) + ": " + e.Message
}
