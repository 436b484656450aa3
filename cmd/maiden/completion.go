package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/maiden-run/maiden/config"
)

// Shell completion. The scripts are thin: on every Tab they run
// `maiden __complete WORD...` (the words typed so far, the last being the
// one to complete), and the binary answers from its command table and the
// flags its commands really define (commandFlags). So completion always
// matches the installed maiden, a new flag shows up with no script change,
// and the logic is Go, tested as Go. __complete prints one line naming
// what to complete ("words", or "files"/"dirs" for the shell's own file
// completion), then the candidates, one per line, each optionally followed
// by a tab and a description.

type completeKind int

const (
	completeWords completeKind = iota
	completeFiles
	completeDirs
)

var completeKindNames = map[completeKind]string{completeWords: "words", completeFiles: "files", completeDirs: "dirs"}

type candidate struct{ word, desc string }

type completion struct {
	kind  completeKind
	words []candidate
}

// choices completes the first positional argument from a fixed list.
func choices(words ...string) func(int, map[string]string) completion {
	return func(i int, _ map[string]string) completion {
		if i > 0 {
			return completion{}
		}
		var c completion
		for _, w := range words {
			c.words = append(c.words, candidate{word: w})
		}
		return c
	}
}

// completeCall completes TOOL with the tools of the agent.toml that -config
// names (or the default), read as TOML only: nothing is loaded or run.
func completeCall(i int, flags map[string]string) completion {
	if i > 0 {
		return completion{}
	}
	path := flags["config"]
	if path == "" {
		path = os.Getenv("MAIDEN_CONFIG")
	}
	if path == "" {
		path = "agent.toml"
	}
	data, err := config.ReadFile(path, config.MaxFileBytes)
	if err != nil {
		return completion{}
	}
	tools, err := tomlTools(data)
	if err != nil {
		return completion{}
	}
	// Only names config would accept: an agent.toml not loaded (a cloned
	// repository's) could name a tool with an escape sequence, a newline
	// (another candidate line) or $(...), which the shell puts unquoted on
	// the command line.
	var c completion
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		if config.ValidName(name) {
			c.words = append(c.words, candidate{word: name})
		}
	}
	return c
}

// completeArgs completes the last of words (the arguments after the program
// name; the last one may be empty).
func completeArgs(words []string) completion {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, prev := words[len(words)-1], words[:len(words)-1]
	if len(prev) == 0 {
		if strings.HasPrefix(cur, "-") {
			return filtered(cur, completion{words: []candidate{{"-h", "list the commands"}, {"-version", "print the version"}}})
		}
		var c completion
		for _, name := range visibleCommandNames() {
			c.words = append(c.words, candidate{name, lookupCommand(name).summary})
		}
		return filtered(cur, c)
	}
	c := lookupCommand(prev[0])
	if c == nil || c.hidden || strings.Contains(prev[0], " ") {
		return completion{}
	}
	i := 1
	for c.run == nil {
		if i == len(prev) {
			var subs completion
			for _, s := range c.subs {
				subs.words = append(subs.words, candidate{s, lookupCommand(c.name + " " + s).summary})
			}
			return filtered(cur, subs)
		}
		if c = lookupCommand(c.name + " " + prev[i]); c == nil {
			return completion{}
		}
		i++
	}
	fs := commandFlags(c)
	lookup := func(name string) *flag.Flag {
		if fs == nil {
			return nil
		}
		return fs.Lookup(name)
	}

	// Replay the words typed after the command as its flag parsing would.
	flags := map[string]string{}
	npos := 0
	var expect *flag.Flag // a flag whose value is the next word
	dashdash := false
	for _, w := range prev[i:] {
		switch {
		case expect != nil:
			flags[expect.Name], expect = w, nil
		case !dashdash && w == "--" && (c.interspersed || npos == 0):
			dashdash = true
		case !dashdash && (c.interspersed || npos == 0) && len(w) > 1 && w[0] == '-':
			name, val, hasVal := strings.Cut(strings.TrimPrefix(w[1:], "-"), "=")
			f := lookup(name)
			switch {
			case f == nil:
			case hasVal:
				flags[name] = val
			case isBoolFlag(f):
				flags[name] = "true"
			default:
				expect = f
			}
		default:
			npos++
		}
	}
	if expect != nil {
		return filtered(cur, flagValues(expect))
	}
	if !dashdash && (c.interspersed || npos == 0) && strings.HasPrefix(cur, "-") {
		dashes := "-"
		if strings.HasPrefix(cur, "--") {
			dashes = "--"
		}
		if name, _, ok := strings.Cut(cur[len(dashes):], "="); ok {
			f := lookup(name)
			if f == nil {
				return completion{}
			}
			vals := flagValues(f)
			for j := range vals.words {
				vals.words[j].word = dashes + name + "=" + vals.words[j].word
			}
			return filtered(cur, vals)
		}
		var all completion
		if fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				all.words = append(all.words, candidate{dashes + f.Name, flagSummary(f)})
			})
		}
		return filtered(cur, all)
	}
	if c.complete == nil {
		return completion{}
	}
	return filtered(cur, c.complete(npos, flags))
}

// filtered keeps the candidates that extend what is typed; file completion
// is left to the shell.
func filtered(cur string, c completion) completion {
	if c.kind != completeWords {
		return c
	}
	out := completion{}
	for _, w := range c.words {
		if strings.HasPrefix(w.word, cur) {
			out.words = append(out.words, w)
		}
	}
	return out
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// flagValues completes a flag's value: its declared choices, true/false for
// a boolean, files for a FILE or PATH, directories for a DIR.
func flagValues(f *flag.Flag) completion {
	if ch, ok := f.Value.(interface{ Choices() []string }); ok {
		return choices(ch.Choices()...)(0, nil)
	}
	if isBoolFlag(f) {
		return choices("true", "false")(0, nil)
	}
	switch placeholder, _ := flag.UnquoteUsage(f); placeholder {
	case "FILE", "PATH":
		return completion{kind: completeFiles}
	case "DIR":
		return completion{kind: completeDirs}
	}
	return completion{}
}

// flagSummary is the first clause of a flag's usage, for the shells that
// show descriptions.
func flagSummary(f *flag.Flag) string {
	name, u := flag.UnquoteUsage(f)
	u = strings.TrimPrefix(u, name+": ")
	for _, sep := range []string{" (", "; "} {
		if i := strings.Index(u, sep); i > 0 {
			u = u[:i]
		}
	}
	u = strings.TrimSpace(u)
	if len(u) > 70 {
		u = strings.TrimSpace(u[:67]) + "..."
	}
	return u
}

// cmdComplete is the hidden `maiden __complete WORD...` the scripts call.
func cmdComplete(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) int {
	c := completeArgs(args)
	var b strings.Builder
	b.WriteString(completeKindNames[c.kind] + "\n")
	for _, w := range c.words {
		b.WriteString(w.word)
		if w.desc != "" {
			b.WriteString("\t" + strings.ReplaceAll(w.desc, "\n", " "))
		}
		b.WriteByte('\n')
	}
	io.WriteString(stdout, b.String())
	return exitOK
}

const completionHelp = `
Prints a script that makes the shell complete maiden's commands, flags,
their values and (for call) the tool names of agent.toml. The script asks
the maiden binary itself on each Tab, so it stays right across upgrades.

  bash:  source <(maiden completion bash)            in ~/.bashrc, or
         maiden completion bash > ~/.local/share/bash-completion/completions/maiden
  zsh:   source <(maiden completion zsh)             in ~/.zshrc, after compinit, or
         maiden completion zsh > "${fpath[1]}/_maiden"
  fish:  maiden completion fish > ~/.config/fish/completions/maiden.fish

The scripts complete the command named maiden (on your PATH).`

var completionScripts = map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}

func cmdCompletion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := bareFlags("completion", stderr)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: maiden completion bash|zsh|fish")
		return exitUsage
	}
	script, ok := completionScripts[pos[0]]
	if !ok {
		fmt.Fprintf(stderr, "maiden completion: unknown shell %q (there is: bash, zsh, fish)\n", pos[0])
		return exitUsage
	}
	io.WriteString(stdout, script)
	return exitOK
}

const bashCompletion = `# bash completion for maiden, printed by "maiden completion bash".
# The candidates come from the maiden binary (maiden __complete WORD...), so
# they match its commands and flags. Install:
#   source <(maiden completion bash)        (e.g. in ~/.bashrc), or
#   maiden completion bash > ~/.local/share/bash-completion/completions/maiden
_maiden() {
    local prog=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
    local line=${COMP_LINE:0:COMP_POINT}
    # Right after "=", readline completes the empty text that follows it.
    [[ $cur == "=" ]] && cur=""
    [[ $prog == "~/"* ]] && prog=$HOME/${prog#"~/"}
    # maiden's own words: bash would split -flag=value at "=".
    local -a words
    read -r -a words <<<"$line"
    if [[ -z $line || $line == *[[:space:]] ]]; then words+=(""); fi
    local out
    out=$("$prog" __complete "${words[@]:1}" 2>/dev/null) || return 0
    local kind=${out%%$'\n'*} cands=""
    [[ $out == *$'\n'* ]] && cands=${out#*$'\n'}
    # What bash calls the word may be the tail of maiden's (after "=").
    local full=${words[${#words[@]}-1]} strip=""
    if [[ $full != "$cur" && $full == *"$cur" ]]; then strip=${full%"$cur"}; fi
    COMPREPLY=()
    case $kind in
    files | dirs)
        compopt -o filenames 2>/dev/null
        local f
        while IFS= read -r f; do
            [[ -n $f ]] && COMPREPLY+=("$f")
        done < <(if [[ $kind == dirs ]]; then compgen -d -- "$cur"; else compgen -f -- "$cur"; fi)
        ;;
    *)
        local c
        while IFS= read -r c; do
            [[ -z $c ]] && continue
            c=${c%%$'\t'*}
            [[ -n $strip ]] && c=${c#"$strip"}
            COMPREPLY+=("$c")
        done <<<"$cands"
        ;;
    esac
    return 0
}
complete -F _maiden maiden
`

const zshCompletion = `#compdef maiden
# zsh completion for maiden, printed by "maiden completion zsh".
# The candidates come from the maiden binary (maiden __complete WORD...), so
# they match its commands and flags. Install:
#   source <(maiden completion zsh)         (in ~/.zshrc, after compinit), or
#   maiden completion zsh > "${fpath[1]}/_maiden"
_maiden() {
    local prog=${words[1]}
    local -a lines cands
    lines=("${(@f)$(${~prog} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    case ${lines[1]} in
    files|dirs)
        [[ $PREFIX == -*=* ]] && compset -P '*='
        if [[ ${lines[1]} == dirs ]]; then _files -/; else _files; fi
        ;;
    words)
        local l w d
        for l in "${(@)lines[2,-1]}"; do
            [[ -z $l ]] && continue
            w=${l%%$'\t'*}
            d=""
            [[ $l == *$'\t'* ]] && d=${l#*$'\t'}
            cands+=("${w//:/\\:}${d:+:$d}")
        done
        (( ${#cands} )) && _describe -t maiden maiden cands
        ;;
    esac
    return 0
}
if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then
    _maiden "$@"
else
    compdef _maiden maiden
fi
`

const fishCompletion = `# fish completion for maiden, printed by "maiden completion fish".
# The candidates come from the maiden binary (maiden __complete WORD...), so
# they match its commands and flags. Install:
#   maiden completion fish > ~/.config/fish/completions/maiden.fish
function __maiden_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l prog (string replace -r '^~/' "$HOME/" -- $tokens[1])
    set -l out ($prog __complete $tokens[2..-1] $cur 2>/dev/null)
    or return 0
    switch "$out[1]"
        case files dirs
            set -l prefix ''
            if string match -qr '^-[^=]*=' -- $cur
                set prefix (string replace -r '=.*' '=' -- $cur)
                set cur (string replace -r '^[^=]*=' '' -- $cur)
            end
            if test "$out[1]" = dirs
                printf '%s\n' $prefix(__fish_complete_directories $cur)
            else
                printf '%s\n' $prefix(__fish_complete_path $cur)
            end
        case '*'
            printf '%s\n' $out[2..-1]
    end
end
complete -c maiden -f -a '(__maiden_complete)'
`
