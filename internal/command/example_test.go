package command_test

import (
	"fmt"

	"github.com/maiden-run/maiden/internal/command"
	"github.com/maiden-run/maiden/internal/grant"
)

func Example() {
	spec, err := command.Load([]byte(`{
		"maiden_command": 1, "name": "git",
		"commands": [{"name": "log", "end_of_options": "--",
			"options": [{"name": "max-count", "short": "n", "type": "integer"}, {"name": "author", "kind": "list"}],
			"positionals": [{"name": "paths", "variadic": true}]}]}`))
	if err != nil {
		panic(err)
	}
	card, _ := grant.Parse("tool:invoke git log --max-count=* -- *.md")

	inv, _ := spec.ParseJSON([]byte(`{"command": "log", "max-count": 5, "paths": ["README.md"]}`))
	fmt.Println(inv.Target("git"), card.Allows(inv.Target("git")))
	fmt.Printf("%q\n", inv.Argv(command.StyleSeparate))

	inv, _ = spec.ParseArgv([]string{"log", "-n5", "--author", "--upload-pack=x", "--", "-x.md"})
	fmt.Println(inv.Target("git"), card.Allows(inv.Target("git")))
	fmt.Printf("%q\n", inv.Argv(command.StyleSeparate))

	_, err = spec.ParseArgv([]string{"log", "--upload-pack=touch /tmp/x"})
	fmt.Println(err)
	// Output:
	// tool:invoke git log --max-count=5 -- README.md true
	// ["log" "--max-count" "5" "--" "README.md"]
	// tool:invoke git log --author=--upload-pack=x --max-count=5 -- -x.md false
	// ["log" "--author=--upload-pack=x" "--max-count" "5" "--" "-x.md"]
	// argument 1 ("--upload-pack=touch /tmp/x"): "git log" has no option --upload-pack
}
