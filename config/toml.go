package config

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pelletier/go-toml/v2/unstable"
)

// This file turns TOML text into a small tree that remembers where every key
// and value came from. go-toml's decoder stops at the first problem and loses
// positions; the unstable parser gives us positions, so we enforce TOML's
// table rules ourselves and leave the schema to validate.go.

type nodeKind int

const (
	tableNode       nodeKind = iota
	arrayTablesNode          // [[name]]
	valueNode                // anything on the right of '=' except an inline table
)

// tableOrigin records how a table came to exist, because TOML allows adding
// to some tables later and forbids it for others.
type tableOrigin int

const (
	implicitTable tableOrigin = iota // parent named in a [a.b] header, may still get its own header
	headerTable                      // [header] or [[header]] element
	dottedTable                      // created by a dotted key: a.b = 1
	inlineTable                      // { ... }: closed once written
)

type tnode struct {
	kind nodeKind
	line int // line of the key (or header) that created it

	// tableNode
	origin tableOrigin
	keys   map[string]*tnode
	order  []string // insertion order, for deterministic messages

	// arrayTablesNode
	elems []*tnode

	// valueNode
	val *tvalue
}

type tvalue struct {
	kind  unstable.Kind
	line  int
	text  string    // decoded string, or the raw token for numbers, booleans, dates
	elems []*tvalue // Array
	table *tnode    // InlineTable
}

func newTable(origin tableOrigin, line int) *tnode {
	return &tnode{kind: tableNode, origin: origin, line: line, keys: map[string]*tnode{}}
}

func (t *tnode) add(name string, child *tnode) {
	t.keys[name] = child
	t.order = append(t.order, name)
}

// keyPath is a key path as a linked list, so that descending one level is
// O(1) however deep a hostile document nests inline tables.
type keyPath struct {
	parent *keyPath
	name   string
}

func (p *keyPath) child(name string) *keyPath { return &keyPath{parent: p, name: name} }

func (p *keyPath) String() string {
	var parts []string
	for ; p != nil; p = p.parent {
		parts = append(parts, p.name)
	}
	slices.Reverse(parts)
	return formatKey(parts)
}

type keyPart struct {
	name string
	line int
}

type builder struct {
	file       string
	lineStarts []int // byte offset at which each line starts
	errs       Errors
	truncated  bool // errors were dropped after maxErrors
}

func (b *builder) errorf(line int, path *keyPath, format string, args ...any) {
	if len(b.errs) >= maxErrors {
		b.truncated = true
		return // before formatting: a hostile file can make each key path long
	}
	b.errs = append(b.errs, &Error{File: b.file, Line: line, Key: path.String(), Msg: fmt.Sprintf(format, args...)})
}

// parseDocument builds the tree. A syntax error ends parsing; what was read
// up to then is still returned so that it can be checked too, and complete
// reports whether the whole file was read.
func parseDocument(file string, data []byte) (root *tnode, errs Errors, truncated, complete bool) {
	// Editors on Windows like to prepend a BOM; TOML parsers differ on it and
	// it is invisible to the user, so accept it.
	data = bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
	b := &builder{file: file, lineStarts: []int{0}}
	for i, c := range data {
		if c == '\n' {
			b.lineStarts = append(b.lineStarts, i+1)
		}
	}
	root = newTable(headerTable, 0)
	cur, curPath := root, (*keyPath)(nil)

	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		expr := p.Expression()
		switch expr.Kind {
		case unstable.KeyValue:
			b.keyValue(cur, curPath, expr)
		case unstable.Table:
			cur, curPath = b.header(root, expr, false)
		case unstable.ArrayTable:
			cur, curPath = b.header(root, expr, true)
		}
	}
	if err := p.Error(); err != nil {
		b.syntaxError(data, err)
		return root, b.errs, b.truncated, false
	}
	return root, b.errs, b.truncated, true
}

func (b *builder) syntaxError(data []byte, err error) {
	e := &Error{File: b.file, Msg: "syntax error: " + err.Error()}
	var perr *unstable.ParserError
	if errors.As(err, &perr) {
		if off, ok := offsetIn(data, perr.Highlight); ok {
			e.Line = b.line(off)
			start := b.lineStarts[e.Line-1]
			col := utf8.RuneCount(data[start:off]) + 1
			e.Msg = fmt.Sprintf("syntax error at column %d: %s", col, perr.Message)
		}
	}
	b.errs = append(b.errs, e)
}

// offsetIn returns where sub starts within data, if it is a subslice of it.
func offsetIn(data, sub []byte) (int, bool) {
	off := cap(data) - cap(sub)
	if off < 0 || off+len(sub) > len(data) {
		return 0, false
	}
	// A slice of some other buffer can have a plausible capacity; only
	// trust the offset if it points at the same memory.
	if len(sub) > 0 && &data[off] != &sub[0] {
		return 0, false
	}
	return off, true
}

// line returns the 1-based line holding byte offset.
func (b *builder) line(offset int) int {
	return sort.Search(len(b.lineStarts), func(i int) bool { return b.lineStarts[i] > offset })
}

func (b *builder) keyParts(n *unstable.Node) []keyPart {
	var parts []keyPart
	it := n.Key()
	for it.Next() {
		k := it.Node()
		parts = append(parts, keyPart{name: string(k.Data), line: b.line(int(k.Raw.Offset))})
	}
	return parts
}

// header handles [a.b] and [[a.b]] and returns the table that following
// key/values go into. When the header is invalid the returned table is either
// the existing one (so its keys are still checked) or a detached one.
func (b *builder) header(root *tnode, n *unstable.Node, array bool) (*tnode, *keyPath) {
	parts := b.keyParts(n)
	if !array && len(parts) >= 2 && parts[0].name == "middleware" {
		// [middleware.NAME] declares a middleware component, beside the
		// [[middleware]] array of layers that name them (use = "NAME").
		// Plain TOML would read it as a table inside the last
		// [[middleware]] entry; agent.toml reads it as a declaration,
		// wherever it is in the file.
		parts[0].name = componentsKey
	}
	var path *keyPath
	t := root
	for _, k := range parts[:len(parts)-1] {
		path = path.child(k.name)
		child, ok := t.keys[k.name]
		switch {
		case !ok:
			child = newTable(implicitTable, k.line)
			t.add(k.name, child)
		case child.kind == arrayTablesNode:
			child = child.elems[len(child.elems)-1]
		case child.kind == valueNode:
			b.errorf(k.line, path, "cannot add a table to %s defined on line %d", describe(child), child.line)
			return newTable(headerTable, k.line), path
		case child.origin == inlineTable:
			b.errorf(k.line, path, "cannot add a table to the inline table defined on line %d", child.line)
			return newTable(headerTable, k.line), path
		}
		t = child
	}
	last := parts[len(parts)-1]
	path = path.child(last.name)
	prev, exists := t.keys[last.name]

	if array {
		if !exists {
			prev = &tnode{kind: arrayTablesNode, line: last.line}
			t.add(last.name, prev)
		} else if prev.kind != arrayTablesNode {
			b.errorf(last.line, path, "cannot define an array of tables: already defined as %s on line %d", describe(prev), prev.line)
			return newTable(headerTable, last.line), path
		}
		elem := newTable(headerTable, last.line)
		prev.elems = append(prev.elems, elem)
		return elem, path
	}

	if !exists {
		child := newTable(headerTable, last.line)
		t.add(last.name, child)
		return child, path
	}
	switch {
	case prev.kind != tableNode:
		b.errorf(last.line, path, "duplicate key: already defined as %s on line %d", describe(prev), prev.line)
	case prev.origin == inlineTable:
		b.errorf(last.line, path, "duplicate table: already defined as an inline table on line %d", prev.line)
	case prev.origin == headerTable:
		b.errorf(last.line, path, "duplicate table: first defined on line %d", prev.line)
		return prev, path
	case prev.origin == dottedTable:
		b.errorf(last.line, path, "duplicate table: already defined by dotted keys on line %d", prev.line)
		return prev, path
	default: // implicit: this header is its one definition
		prev.origin = headerTable
		prev.line = last.line
		return prev, path
	}
	return newTable(headerTable, last.line), path
}

// keyValue adds `a.b.c = value` to table t, whose own key path is tpath.
func (b *builder) keyValue(t *tnode, tpath *keyPath, n *unstable.Node) {
	parts := b.keyParts(n)
	path := tpath
	for _, k := range parts[:len(parts)-1] {
		path = path.child(k.name)
		child, ok := t.keys[k.name]
		switch {
		case !ok:
			child = newTable(dottedTable, k.line)
			t.add(k.name, child)
		case child.kind == tableNode && child.origin == dottedTable:
		case child.kind == tableNode && child.origin == inlineTable:
			b.errorf(k.line, path, "cannot add keys to the inline table defined on line %d", child.line)
			return
		case child.kind == tableNode:
			b.errorf(k.line, path, "cannot add keys with a dotted key to the table defined by a [header] on line %d", child.line)
			return
		default:
			b.errorf(k.line, path, "cannot add keys to %s defined on line %d", describe(child), child.line)
			return
		}
		t = child
	}
	last := parts[len(parts)-1]
	path = path.child(last.name)
	if prev, ok := t.keys[last.name]; ok {
		if prev.kind == valueNode {
			b.errorf(last.line, path, "duplicate key: first defined on line %d", prev.line)
		} else {
			b.errorf(last.line, path, "duplicate key: already defined as %s on line %d", describe(prev), prev.line)
		}
		return
	}
	v := n.Value()
	if v.Kind == unstable.InlineTable {
		child := newTable(inlineTable, last.line)
		b.inline(child, path, v)
		t.add(last.name, child)
		return
	}
	t.add(last.name, &tnode{kind: valueNode, line: last.line, val: b.value(v, last.line, path)})
}

func (b *builder) inline(t *tnode, path *keyPath, n *unstable.Node) {
	it := n.Children()
	for it.Next() {
		if kv := it.Node(); kv.Kind == unstable.KeyValue {
			b.keyValue(t, path, kv)
		}
	}
}

// value copies a value out of the parser, whose nodes do not outlive the
// current expression. line is used when the node has no position of its own
// (arrays do not).
func (b *builder) value(n *unstable.Node, line int, path *keyPath) *tvalue {
	if n.Raw.Length > 0 {
		line = b.line(int(n.Raw.Offset))
	}
	v := &tvalue{kind: n.Kind, line: line}
	switch n.Kind {
	case unstable.Array:
		it := n.Children()
		for it.Next() {
			if c := it.Node(); c.Kind != unstable.Comment {
				v.elems = append(v.elems, b.value(c, line, path))
			}
		}
		// An array has no position of its own; for a nested one, the line
		// of its first element is where the reader will look.
		if n.Raw.Length == 0 && len(v.elems) > 0 {
			v.line = v.elems[0].line
		}
	case unstable.InlineTable:
		v.table = newTable(inlineTable, line)
		b.inline(v.table, path, n)
	default:
		v.text = string(n.Data)
	}
	return v
}

// parseInt decodes a TOML integer token (already checked by the parser:
// optional sign, 0x/0o/0b prefix, single underscores between digits).
func parseInt(raw string) (int64, error) {
	s := strings.ReplaceAll(raw, "_", "")
	base := 10
	if len(s) > 2 && s[0] == '0' {
		switch s[1] {
		case 'x':
			base = 16
		case 'o':
			base = 8
		case 'b':
			base = 2
		}
		if base != 10 {
			s = s[2:]
		}
	}
	v, err := strconv.ParseInt(s, base, 64)
	if err != nil {
		return 0, err
	}
	return v, nil
}

// formatKey renders a key path the way it would be written in TOML, quoting
// parts that are not bare keys so the message is unambiguous.
func formatKey(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 {
			b.WriteByte('.')
		}
		if i == 0 && p == componentsKey {
			p = "middleware"
		}
		b.WriteString(formatKeyPart(p))
	}
	return b.String()
}

func formatKeyPart(p string) string {
	if p == "" {
		return `""`
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return strconv.Quote(p)
		}
	}
	return p
}

// describe names what a node is, for "got ..." and "already defined as ..."
// messages.
func describe(n *tnode) string {
	switch n.kind {
	case arrayTablesNode:
		return "an array of tables"
	case valueNode:
		return describeValue(n.val)
	}
	if n.origin == inlineTable {
		return "an inline table"
	}
	return "a table"
}

func describeValue(v *tvalue) string {
	switch v.kind {
	case unstable.String:
		return "string " + quoteShort(v.text)
	case unstable.Integer:
		return "integer " + v.text
	case unstable.Float:
		return "float " + v.text
	case unstable.Bool:
		return "boolean " + v.text
	case unstable.Array:
		return "an array"
	case unstable.InlineTable:
		return "an inline table"
	case unstable.LocalDate:
		return "date " + v.text
	case unstable.LocalTime:
		return "time " + v.text
	case unstable.LocalDateTime, unstable.DateTime:
		return "date-time " + v.text
	}
	return "a " + v.kind.String()
}

// quoteShort quotes s for a message, cutting it so one bad value cannot
// flood the terminal.
func quoteShort(s string) string {
	const maxRunes = 64
	if utf8.RuneCountInString(s) <= maxRunes {
		return strconv.Quote(s)
	}
	r := []rune(s)
	return strconv.Quote(string(r[:maxRunes])) + "..."
}
