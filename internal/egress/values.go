package egress

// ValueRedactor returns a function that hides the given secret values (by
// name) and their common encodings in text, as the redactor of a policy's
// secrets does (Gate.Redactor): a value becomes [REDACTED:NAME]. It is for
// values the gate did not look up itself, such as one revealed to a tool
// during a call (maiden:tool@0.3.0's reveal), which must stay redacted from
// that call's output and logs even if the secret was rotated since the
// call's redactor was made.
func ValueRedactor(values map[string]string) func(string) string {
	vals := make([]secretValue, 0, len(values))
	for name, v := range values {
		vals = append(vals, secretValue{name, v})
	}
	return newRedactor(vals).String
}
