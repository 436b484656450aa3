// Package grant is the one definition of a grant: how `class:verb resource`
// is written and parsed, how a call's input is rendered as arguments, and
// how a grant matches a target or covers a narrower grant. The card model
// (internal/cards) decides over grants; the typed command model of a later
// issue reuses Render's argument list (Arg) and the same matcher, so both
// live here and know nothing of cards, agents or the store.
//
//	g, err := grant.Parse("tool:invoke weather --city=Par*")
//	args, err := grant.Render([]byte(`{"city":"Paris"}`)) // [--city=Paris]
//	g.Allows(grant.ToolTarget("weather", args))          // true
//
// # Grammar
//
//	grant     = class [ ":" verb ] SP resource      ; no verb, or "*": any verb of the class
//	class     = "tool" | "network" | "secret" | "fs" | "card"
//	verb      = tool: invoke | network: connect | secret: use, reveal
//	          | fs: read, write | card: derive, revoke, transfer, inspect, install
//	resource  = tool: NAME [ "@" digest ] *( SP cmdword ) *( SP arg ) [ SP "--..." ] [ SP "--" *( SP pos ) [ SP "..." ] ]
//	          | network: "*" | HOST [ ":" ( PORT | "*" ) ]   ; HOST as agent.toml's http_allow
//	          | secret, card: NAME                          ; card: an ID or "*"
//	          | fs: "/" or "/" SEG *( "/" SEG )              ; SEG: literal, "*" (one), "**" (any number)
//	arg       = "--" NAME "=" VALUE                         ; VALUE may be empty
//	          | "--" NAME                                   ; the boolean true
//	          | "--no-" NAME                                ; the boolean false
//	cmdword   = ALNUM *( ALNUM | "-" | "_" | "." )          ; a typed command's path, literal
//	pos       = VALUE                                       ; one positional (a glob); "\..." a literal "..."
//	digest    = "sha256:" 64HEXDIG                          ; the component the call must run; not in approve
//
// Words are separated by spaces or tabs. A backslash makes the next
// character literal anywhere (`\*` a literal asterisk, `\=` an '=' in an
// argument name, `\ ` a space, `\\` a backslash). A word that starts with
// a double quote is quoted up to the next unescaped one (`"--city=New
// York"`); elsewhere '"' is an ordinary character, so a JSON value needs no
// escapes (`--o={"k":"v"}`). An unescaped '*' is a
// wildcard in a tool name, a secret or card name and an argument value
// (any run of characters, including none), never in an argument name. A
// trailing `--...` allows arguments the grant does not mention.
//
// Parse errors are *ParseError values that give the column and what was
// expected there. Grant.String is the canonical form (arguments sorted by
// name, the verb written "*" when any); Parse(g.String()) gives g back.
//
// # Rendering a call's input (Render)
//
// The input must be a JSON object; each top-level property becomes
// arguments named after it, in order of the names' bytes:
//   - a string: `--name=value`, the value verbatim (no quoting, no escapes);
//   - a number: `--name=N`, N the canonical number (the exact value, written
//     as JavaScript writes numbers but never rounded: 1.0 → 1, 1e2 → 100,
//     1e21 → 1e+21, 0.0000001 → 1e-7, -0 → 0). A number a binary64 reader
//     (JavaScript's JSON.parse, a Go float64) reads as another number
//     (9007199254740993, 1e400) is refused: rounding it would let a card
//     pinned to one number allow another, and rendering it exactly would
//     let such a tool run on a number no card allowed;
//   - true / false: `--name` / `--no-name`; a boolean property whose own
//     name starts with "no-" renders `--no-x=true` instead, so that
//     `--no-x` always means x=false;
//   - null, and an object: `--name=` + canonical JSON (keys sorted bytewise,
//     no spaces, canonical numbers, minimal string escapes);
//   - an array: one `--name=...` per element, in the array's order (strings
//     verbatim, other elements as canonical JSON); an empty array is
//     `--name=[]` so that it differs from an absent property.
//
// The rendering does not tell the string "5" from the number 5 (both
// `--n=5`): the tool's input schema fixes the type, and the call is checked
// against it. An input a tool's decoder could read differently from its
// rendering is refused (ErrRender): duplicate keys at any depth, invalid
// UTF-8, lone surrogate escapes, an empty property name, a number binary64
// rounds. RenderValue renders an input already decoded (strictly: see
// jsonparse.ParseStrict) exactly as Render renders its text.
//
// # Grants naming a component (component.go)
//
// `tool:invoke echo@sha256:HEX --message=*` allows echo only while the
// call's component (Target.Component, set by the call path: an oci://
// tool's pinned manifest digest, a local file's SHA-256) is that digest.
// The digest is normalised (the algorithm and hex lower-cased) and must be
// sha256 with all 64 digits; an unescaped '@' in a tool grant's first word
// always starts one (`\@` is a literal '@'). A grant naming no digest
// allows any component; one naming a digest covers only grants naming the
// same. Prohibitions match alike: a deny naming a digest forbids that
// component only.
//
// # Matching (Grant.Allows)
//
// Argument by argument: each name the grant mentions must occur in the call
// exactly as often as in the grant, each occurrence (in order) with the same
// form and a value the grant's value glob matches. A name the grant does
// not mention is refused unless the grant ends with `--...`; a name the
// grant mentions but the call lacks is refused (the tool's default is not
// what the grant allowed). Under `--...`, an argument whose name equals a
// mentioned one but for case is still refused: Go's encoding/json fills a
// field from any case variant of its name, so {"city":"Paris","CITY":"x"}
// would reach a Go tool as city=x. So `tool:invoke search --pattern=cart` allows
// exactly `{"pattern":"cart"}`; `--pattern=\*` allows only the value "*".
//
// # Typed commands (CommandTarget)
//
// A call of a typed command (internal/command: a tool described as a
// command tree, or a wrapped CLI) is written in the same grammar: the
// command words after the tool's name, its options as arguments, then "--"
// and its positionals, `tool:invoke git log --max-count=5 -- README.md`. A
// grant's command words must equal the call's (same number, same words); a
// grant without "--" allows no positionals, with "--" exactly as many as it
// names, each matching its glob, and with a final "..." any further ones.
// "--..." allows further options only, never positionals. A JSON tool's call
// has neither command words nor positionals, so nothing changes for it.
//
// # Attenuation (Grant.Covers)
//
// parent.Covers(child) is true only if every target child allows, parent
// allows. For globs it matches parent against child symbolically (a child
// '*' is consumed only by a parent '*'), which is sound and for the rare
// pairs where it is not complete only refuses a derivation. A fuzz test
// checks soundness against Allows.
package grant
