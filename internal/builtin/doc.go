// Package builtin is maiden's host-native tools: fs_read, fs_write and fs_list inside a session's boundary, and
// web_fetch through the egress gate with the session's secret material (issue 14, "Built-in tools" and "Secrets as
// material"). Each tool is one function over a boundary.Boundary and the tool's input JSON; each returns its output
// value (JSON-encodable, described by the exported output schema) or an error:
//
//   - *boundary.CommandError when the call needs more than the boundary (reason sandbox_boundary_required, with the
//     requiredExpansion the model can ask for) or can never run inside it (explicit_deny, boundary_not_managed,
//     credential_not_configured, ...): the caller returns it as MCP structuredContent;
//   - *Error for everything else (bad input, not found, too large, a symlink leaving the allowed directory, a refused
//     or failed fetch), naming the tool, the path or URL and the cause.
//
// The package is pure of maiden's root: bindings, cards, middleware, audit and sessions are the caller's, who must
// run these functions through them like any tool (a built-in is not a bypass). Files are touched only through
// internal/safefs (openat2 RESOLVE_BENEATH, or an O_NOFOLLOW walk), after boundary.Check has passed, with roots built
// from the same boundary, so there is no window between the check and the open. The network is reached only through
// the Fetcher the caller supplies (the egress gate). See docs/builtins.md.
package builtin
