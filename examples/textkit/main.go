// textkit: a maiden tool in Go that takes commands instead of one JSON
// object. Its schema() is a command tree (maiden.Commands): maiden shows
// agents the tree's JSON Schema, checks every call against the tree (an
// unknown command or option, a value out of range, is refused naming it),
// and renders the call for the agent's cards in the grammar of wrapped
// CLIs, so a card can allow one command and not another:
//
//	tool:invoke textkit count --unit=* -- *     count only, any unit, one text
//	tool:invoke textkit base64 encode -- *      encode, without --url
//
//	maiden build examples/textkit
//	maiden call -config examples/agent.toml textkit '{"command":"count","unit":"words","text":"a b c"}'
//	maiden help -config examples/agent.toml textkit base64 decode
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	maiden "github.com/maiden-run/maiden/sdk/go"
)

// text is the positional most commands take.
var text = []maiden.Positional{{Name: "text", Required: true, Summary: "the text to work on"}}

func init() {
	maiden.Register(maiden.Commands(maiden.Command{
		Name:    "textkit",
		Summary: "Small text utilities as commands: count, case, repeat, base64 encode and decode.",
		Commands: []maiden.Command{
			{
				Name:        "count",
				Summary:     "Counts the characters, words or lines of a text.",
				Options:     []maiden.Option{{Name: "unit", Short: "u", Enum: []string{"chars", "words", "lines"}, Default: "chars", Summary: "what to count"}},
				Positionals: text,
				Run: func(_ context.Context, call *maiden.Invocation) (any, error) {
					t := call.Positionals[0]
					n := 0
					switch call.String("unit") {
					case "chars":
						n = utf8.RuneCountInString(t)
					case "words":
						n = len(strings.Fields(t))
					case "lines":
						n = strings.Count(t, "\n")
						if t != "" && !strings.HasSuffix(t, "\n") {
							n++
						}
					}
					return map[string]any{"unit": call.String("unit"), "count": n}, nil
				},
			},
			{
				Name:        "case",
				Summary:     "Changes the case of a text.",
				Options:     []maiden.Option{{Name: "to", Enum: []string{"upper", "lower", "title"}, Required: true}},
				Positionals: text,
				Run: func(_ context.Context, call *maiden.Invocation) (any, error) {
					t := call.Positionals[0]
					switch call.String("to") {
					case "upper":
						t = strings.ToUpper(t)
					case "lower":
						t = strings.ToLower(t)
					case "title":
						t = title(t)
					}
					return map[string]any{"text": t}, nil
				},
			},
			{
				Name:    "repeat",
				Summary: "Repeats a text.",
				Options: []maiden.Option{
					{Name: "times", Short: "n", Type: maiden.TypeInteger, Minimum: ptr(1), Maximum: ptr(100), Required: true},
					{Name: "separator", Default: " "},
				},
				Positionals: text,
				Run: func(_ context.Context, call *maiden.Invocation) (any, error) {
					parts := make([]string, call.Int("times"))
					for i := range parts {
						parts[i] = call.Positionals[0]
					}
					return map[string]any{"text": strings.Join(parts, call.String("separator"))}, nil
				},
			},
			{
				Name:    "base64",
				Summary: "Base64 (RFC 4648).",
				Options: []maiden.Option{{Name: "url", Kind: maiden.KindFlag, Global: true, Summary: "the URL-safe alphabet"}},
				Commands: []maiden.Command{
					{
						Name: "encode", Aliases: []string{"enc"}, Summary: "Encodes a text's UTF-8 bytes.",
						Positionals: text,
						Run: func(_ context.Context, call *maiden.Invocation) (any, error) {
							return map[string]any{"text": encoding(call).EncodeToString([]byte(call.Positionals[0]))}, nil
						},
					},
					{
						Name: "decode", Aliases: []string{"dec"}, Summary: "Decodes base64 into a UTF-8 text.",
						Positionals: text,
						Run: func(_ context.Context, call *maiden.Invocation) (any, error) {
							b, err := encoding(call).DecodeString(call.Positionals[0])
							if err != nil {
								return nil, err
							}
							if !utf8.Valid(b) {
								return nil, errors.New("the decoded bytes are not UTF-8 text")
							}
							return map[string]any{"text": string(b)}, nil
						},
					},
				},
			},
		},
	}))
}

func encoding(call *maiden.Invocation) *base64.Encoding {
	if call.Bool("url") {
		return base64.URLEncoding
	}
	return base64.StdEncoding
}

// title upper-cases the first letter of each word.
func title(s string) string {
	prev := ' '
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(prev) {
			r = unicode.ToUpper(r)
		}
		prev = r
		return r
	}, s)
}

func ptr(n int64) *int64 { return &n }

func main() {}
