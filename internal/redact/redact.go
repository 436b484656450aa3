package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"
)

const (
	// MaxPatterns bounds the operator's patterns.
	MaxPatterns = 64
	// MaxPatternLen bounds one pattern's source, in bytes.
	MaxPatternLen = 1024
	// MaxPatternInsts bounds one pattern's compiled RE2 program
	// (instructions), so that `a{1000}{1000}`-style blow-ups are refused.
	MaxPatternInsts = 20_000
	// maxDepth bounds how many levels of JSON string nesting are decoded.
	maxDepth = 4
)

// Pattern is one operator pattern: an RE2 expression and the name its
// replacement carries ([REDACTED:name]). If the expression has a group
// named "secret", only that group is replaced.
type Pattern struct {
	Name string
	Expr string
}

// Error is a pattern that does not compile, naming it.
type Error struct {
	Index int    // 0-based position in the list
	Name  string // the pattern's name
	Msg   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("redact pattern %d (%q): %s", e.Index+1, e.Name, e.Msg)
}

type detector struct {
	name   string
	expr   string         // the definition
	re     *regexp.Regexp // expr compiled; nil for a detStarts or detValue detector, which never runs it
	groups []int          // the submatches named "secret"; the first that matched is replaced; none: the whole match
	hints  []string       // run re only if the text holds one of these (case-sensitive); nil: always
	marker string
	skip   func(string) bool // a match that is not a secret after all
	// starts (lower case) and anchored: see detStarts.
	starts   []string
	anchored *regexp.Regexp
	// key and scan replace anchored: see detValue.
	key  *regexp.Regexp
	scan func(string) (int, int, bool)
}

// secret returns the bounds of what a match m of d.re replaces: the first
// group named "secret" that matched, else the whole match.
func (d *detector) secret(m []int) (int, int) {
	for _, g := range d.groups {
		if m[2*g] >= 0 {
			return m[2*g], m[2*g+1]
		}
	}
	return m[0], m[1]
}

// matchStart is a detStarts detector's match at the start of rest (the
// text from an occurrence of one of its start words): the bounds of what
// it replaces, as secret returns them, and where in rest to look for the
// start word's next occurrence (see valueNext). Expressions run on the
// first startWindow bytes of rest; a detValue's key and value are matched
// on rest itself, so a value of any length, after any run of whitespace
// around its ':' or '=', is matched whole whatever its width in bytes
// (escapes, 4-byte UTF-8), never cut at the window.
func (d *detector) matchStart(rest string) (s, e, next int, ok bool) {
	w := rest[:min(len(rest), startWindow)]
	if d.scan == nil {
		m := d.anchored.FindStringSubmatchIndex(w)
		if m == nil {
			return 0, 0, 1, false
		}
		s, e := d.secret(m)
		return s, e, 1, true
	}
	// The key on rest too: the whitespace around its ':' or '=' has no
	// bound either (a run of it past the window left the value unmatched),
	// and a key's scan stops at the first byte its pattern cannot take.
	k := d.key.FindStringIndex(rest)
	if k == nil {
		return 0, 0, 1, false
	}
	vs, ve, ok := d.scan(rest[k[1]:])
	if !ok {
		return 0, 0, 1, false
	}
	return k[1] + vs, k[1] + ve, valueNext(vs == 0, k[1]+vs, k[1]+ve), true
}

// valueNext is where, after a detValue match at 0 whose value is
// rest[s:e] (bare: not quoted), find looks for the start word's next
// occurrence: past all of a bare value but its last keywordSlack bytes,
// else at 1.
//
// Without it the scans are quadratic: in one bare run holding a keyword
// every few bytes (password=xpassword=x...) each keyword's value runs to
// the run's end. Skipping changes no output. An occurrence inside a bare
// value is a keyword within the run (its letters are of the bare class);
// its match either has its value inside the run too, ending where the run
// ends, at e (a span within [s,e), which find's merge drops: the replaced
// span is at least keywordSlack long, so never skipped as a literal), or
// its key runs past e, which only a keyword ending at e or e-1 (then ':'
// or '=') can do: one starting in the last keywordSlack bytes, which are
// looked at again. A quoted value is not skipped: a keyword inside it may
// take the closing quote as its value's opening one, or open the other
// kind of quote; its scans are linear anyway (see find).
func valueNext(bare bool, s, e int) int {
	if !bare || e-s <= keywordSlack {
		return 1
	}
	return max(1, e-keywordSlack)
}

// Redactor applies built-in detectors and operator patterns. It is
// immutable and safe for concurrent use.
type Redactor struct {
	dets []detector
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// New compiles the operator's patterns; with builtins, the built-in
// detectors (Builtins) run too, before the operator's.
func New(patterns []Pattern, builtins bool) (*Redactor, error) {
	if len(patterns) > MaxPatterns {
		return nil, fmt.Errorf("redact: %d patterns, more than the limit of %d", len(patterns), MaxPatterns)
	}
	r := &Redactor{}
	if builtins {
		r.dets = append(r.dets, builtin...)
	}
	for i, p := range patterns {
		d, err := compile(p)
		if err != nil {
			return nil, &Error{Index: i, Name: p.Name, Msg: err.Error()}
		}
		r.dets = append(r.dets, d)
	}
	return r, nil
}

func compile(p Pattern) (detector, error) {
	if !nameRE.MatchString(p.Name) {
		return detector{}, errors.New("the name must be 1 to 63 lower-case letters, digits and '-', starting with a letter or digit")
	}
	if p.Expr == "" {
		return detector{}, errors.New("the expression is empty")
	}
	if len(p.Expr) > MaxPatternLen {
		return detector{}, fmt.Errorf("the expression is %d bytes, longer than the limit of %d", len(p.Expr), MaxPatternLen)
	}
	tree, err := syntax.Parse(p.Expr, syntax.Perl)
	if err != nil {
		return detector{}, err
	}
	prog, err := syntax.Compile(tree.Simplify())
	if err != nil {
		return detector{}, err
	}
	if len(prog.Inst) > MaxPatternInsts {
		return detector{}, fmt.Errorf("the expression compiles to %d instructions, more than the limit of %d", len(prog.Inst), MaxPatternInsts)
	}
	re, err := regexp.Compile(p.Expr)
	if err != nil {
		return detector{}, err
	}
	if re.MatchString("") {
		return detector{}, errors.New("the expression matches the empty string")
	}
	d := detector{name: p.Name, re: re, marker: "[REDACTED:" + p.Name + "]"}
	d.groups = secretGroups(re)
	return d, nil
}

// secretGroups lists the indices of the groups named "secret".
func secretGroups(re *regexp.Regexp) []int {
	var gs []int
	for i, n := range re.SubexpNames() {
		if n == "secret" {
			gs = append(gs, i)
		}
	}
	return gs
}

// span is one replacement: text[start:end] becomes repl. from is where
// the match begins, at or before start (a password's key: the Writer
// never cuts between a key and its value).
type span struct {
	start, end int
	repl       string
	from       int
}

// Redact returns text with every detected secret replaced by its marker.
func (r *Redactor) Redact(text string) string {
	out, _ := r.redact(text, 0)
	return out
}

// Count is Redact that also says how many secrets were replaced (for an
// audit record; never the values).
func (r *Redactor) Count(text string) (string, int) {
	return r.redact(text, 0)
}

func (r *Redactor) redact(text string, depth int) (string, int) {
	spans := r.find(text, depth)
	if len(spans) == 0 {
		return text, 0
	}
	var b strings.Builder
	b.Grow(len(text))
	pos, n := 0, 0
	for _, s := range spans {
		b.WriteString(text[pos:s.start])
		b.WriteString(s.repl)
		pos = s.end
		n++
	}
	b.WriteString(text[pos:])
	return b.String(), n
}

// find returns the non-overlapping replacements in text, in order: the
// detectors' matches on the raw text, and each JSON string literal with
// escapes whose decoded value holds a match (replaced by the redacted
// value re-encoded).
//
// Linear time for a detValue detector, whose values have no length bound:
// per start word, occurrences are tried left to right and each key reads
// one keyword and the whitespace and separator after it (two occurrences'
// whitespace runs are disjoint: a keyword is not whitespace). A bare scan
// that fails reads at most 4 characters; one that succeeds is resumed past
// (valueNext), so a byte is read again only within keywordSlack of a
// value's end. A quoted scan, failing or not, reads up to the first
// unescaped quote of its kind: another value's opening quote of that kind
// before it would be such a quote (a key ends in ':', '=' or a space,
// never in an escaping backslash), so the scans of each kind of quote
// read disjoint bytes. Each byte is thus read a bounded number of times
// per start word.
func (r *Redactor) find(text string, depth int) []span {
	var spans []span
	var lower string
	add := func(d *detector, s, e, off, from int) {
		if s < 0 || s == e || strings.HasPrefix(text[off+s:off+e], "[REDACTED:") || d.skip != nil && d.skip(text[off+s:off+e]) {
			return
		}
		spans = append(spans, span{off + s, off + e, d.marker, from})
	}
	for i := range r.dets {
		d := &r.dets[i]
		if d.starts != nil {
			if lower == "" {
				lower = asciiLower(text)
			}
			for _, w := range d.starts {
				for at := 0; ; {
					j := strings.Index(lower[at:], w)
					if j < 0 {
						break
					}
					at += j
					s, e, next, ok := d.matchStart(text[at:])
					if ok {
						add(d, s, e, at, at)
					}
					at += next
				}
			}
			continue
		}
		if d.hints != nil && !containsAny(text, d.hints) {
			continue
		}
		for _, m := range d.re.FindAllStringSubmatchIndex(text, -1) {
			s, e := d.secret(m)
			add(d, s, e, 0, m[0])
		}
	}
	if depth < maxDepth && strings.IndexByte(text, '\\') >= 0 {
		spans = append(spans, r.jsonStrings(text, depth)...)
	}
	return merge(spans)
}

// merge sorts spans and drops or widens overlaps: what find returns.
func merge(spans []span) []span {
	if len(spans) <= 1 {
		return spans
	}
	// Earliest first, longest first at the same start; drop overlaps.
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	out := spans[:1]
	for _, s := range spans[1:] {
		last := &out[len(out)-1]
		if s.start < last.end {
			// A partial overlap (rare: two detectors on neighbouring
			// text) widens the first replacement over both, so no part
			// of either secret survives.
			last.end = max(last.end, s.end)
			last.from = min(last.from, s.from)
			continue
		}
		out = append(out, s)
	}
	return out
}

// asciiLower lower-cases ASCII letters only, so offsets stay those of text.
func asciiLower(text string) string {
	b := []byte(text)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func containsAny(text string, hints []string) bool {
	for _, h := range hints {
		if strings.Contains(text, h) {
			return true
		}
	}
	return false
}

// jsonStrings finds the JSON string literals of text that contain a
// backslash escape, decodes each, and returns a replacement for those
// whose value holds a secret. Quotes are paired left to right, each scan
// ending at the next unescaped quote, so the whole is linear in len(text).
func (r *Redactor) jsonStrings(text string, depth int) []span {
	var spans []span
	i := 0
	for {
		q := strings.IndexByte(text[i:], '"')
		if q < 0 {
			return spans
		}
		start := i + q
		end, escaped := scanString(text, start+1)
		if end < 0 {
			return spans
		}
		i = end + 1
		if !escaped {
			continue
		}
		var val string
		if json.Unmarshal([]byte(text[start:end+1]), &val) != nil {
			i = start + 1 // not a JSON string: pair the closing quote anew
			continue
		}
		red, n := r.redact(val, depth+1)
		if n == 0 {
			continue
		}
		spans = append(spans, span{start, end + 1, encode(red), start})
	}
}

// scanString returns the index of the quote that closes a string whose
// content starts at i, and whether the content has a backslash.
func scanString(text string, i int) (int, bool) {
	escaped := false
	for i < len(text) {
		switch text[i] {
		case '"':
			return i, escaped
		case '\\':
			escaped = true
			i += 2
			continue
		}
		i++
	}
	return -1, escaped
}

func encode(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	_ = e.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
