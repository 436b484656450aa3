package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/maiden-run/maiden"
	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/safetext"
)

// toolHelp answers `maiden help TOOL [COMMAND...]` for a tool of agent.toml
// that describes itself as a command tree: a wrapped CLI (from its
// description in agent.toml) or a WebAssembly tool whose schema() is a
// command description (the tool is loaded to ask it). ok is false when
// args[0] is not such a tool's name, or there is no agent.toml: the caller
// then treats it as a maiden command. An agent.toml that does not load is
// reported with its errors.
func toolHelp(ctx context.Context, cfgPath string, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		if _, serr := os.Stat(cfgPath); serr != nil {
			return 0, false // no agent.toml: args[0] was meant as a maiden command
		}
		// An agent.toml that does not load: say why, rather than call
		// the tool's name an unknown command of maiden's.
		fmt.Fprintf(stderr, "maiden help: %q is not a maiden command, and the tools of %s could not be read:\n%v\n", args[0], cfgPath, err)
		return exitUsage, true
	}
	t, found := cfg.Tool(args[0])
	if !found || t.MCP != nil {
		return 0, false
	}
	var text string
	if t.CLI != nil {
		text = t.CLI.Command.Help(args[1:]...)
	} else {
		h, err := maiden.New(cfg, &maiden.Options{Logger: slog.New(slog.DiscardHandler), Isolation: maiden.Workers, WorkerCommand: workerCommand()})
		if err != nil {
			fmt.Fprintln(stderr, "maiden help:", err)
			return exitUsage, true
		}
		defer h.Close(context.Background())
		text, err = h.CommandHelp(ctx, args[0], args[1:]...)
		switch {
		case errors.Is(err, maiden.ErrNoCommands):
			fmt.Fprintf(stderr, "maiden help: %s takes a JSON object, not commands; maiden tools shows its input schema\n", args[0])
			return exitUsage, true
		case err != nil:
			fmt.Fprintln(stderr, "maiden help:", terminalSafe(err.Error()))
			return exitTrap, true // not a loadable tool (exit 5, as maiden call)
		}
	}
	// The help copies the description's text (a WebAssembly tool's own
	// schema(), a [clis] table's command): escaped for the terminal as
	// maiden tools escapes it, its newlines and tabs kept.
	fmt.Fprint(stdout, safetext.Text(text))
	return exitOK, true
}
