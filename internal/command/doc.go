// Package command is the typed command model: one JSON description of a
// command tree ({"maiden_command": 1, ...}; docs/command-model.md) from
// which a call is parsed (argv-like words or the JSON projection MCP
// clients send), validated with errors that name the offending argument,
// documented (Help, Commands, JSONSchema), rendered in the grammar card
// grants match (internal/grant: command words, --name=value arguments,
// "--" and positionals), and, for a wrapped CLI, turned into argv from that
// rendering only. It is pure: no I/O, no processes.
//
//	s, err := command.Load(description)
//	inv, err := s.ParseJSON([]byte(`{"command":"log","max-count":5}`))
//	g.Allows(inv.Target("git"))            // tool:invoke git log --max-count=5
//	argv := inv.Argv(command.StyleEquals)  // [log --max-count=5]
package command
