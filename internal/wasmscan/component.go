package wasmscan

import (
	"errors"
	"fmt"
)

// ErrUnbounded means the component instantiates a component whose contents
// cannot be known before run time (one it imports, or one another instance
// exports), so its per-instance state cannot be bounded at load.
var ErrUnbounded = errors.New("per-instance state cannot be bounded before running")

// maxDepth bounds the nesting of components. Real toolchains nest one or two
// levels; the bound keeps the scanner's recursion (and Go's stack) small
// whatever the bytes say.
const maxDepth = 32

// Totals add up the state of every core instance one instantiation of a
// component creates.
type Totals struct {
	// CoreInstances counts core module instantiations (a core instance
	// made of inline exports holds no state and is not counted).
	CoreInstances uint64
	// The sums of the Module fields over those instantiations.
	Functions, Imports, Globals, Tables, TableElements, Memories, MemoryBytes, DataBytes, ElemEntries uint64
	// Definitions counts the component-level definitions (core modules,
	// core instances, types, components, instances, aliases, canonical
	// functions, imports and exports) over every component instantiation.
	// wasmtime's compiler inlines each instantiation of a nested component,
	// walking all its definitions again, so this is the compile work that
	// nesting multiplies: a 7 KB component of three levels, each
	// instantiating the next 900 times around 900 definitions, compiled for
	// 26 s.
	Definitions uint64
	// CanonFunctions counts canonical definitions (lifts, lowers, resource
	// and task built-ins) over every component instantiation: wasmtime
	// keeps a record and a function reference per one in each instance.
	CanonFunctions uint64
	// HostBytes estimates the host memory the instances hold outside
	// linear memory (see Costs).
	HostBytes uint64
}

func (t *Totals) addModule(m *Module, c *Costs) {
	t.CoreInstances = add(t.CoreInstances, 1)
	t.Functions = add(t.Functions, m.Functions)
	t.Imports = add(t.Imports, m.Imports)
	t.Globals = add(t.Globals, m.Globals)
	t.Tables = add(t.Tables, m.Tables)
	t.TableElements = add(t.TableElements, m.TableElements)
	t.Memories = add(t.Memories, m.Memories)
	t.MemoryBytes = add(t.MemoryBytes, m.MemoryBytes)
	t.DataBytes = add(t.DataBytes, m.DataBytes)
	t.ElemEntries = add(t.ElemEntries, m.ElemEntries)
	t.HostBytes = add(t.HostBytes, c.hostBytes(m))
}

// addTimes adds n instantiations' worth of u to t.
func (t *Totals) addTimes(u *Totals, n uint64) {
	t.CoreInstances = add(t.CoreInstances, mul(u.CoreInstances, n))
	t.Functions = add(t.Functions, mul(u.Functions, n))
	t.Imports = add(t.Imports, mul(u.Imports, n))
	t.CanonFunctions = add(t.CanonFunctions, mul(u.CanonFunctions, n))
	t.Definitions = add(t.Definitions, mul(u.Definitions, n))
	t.Globals = add(t.Globals, mul(u.Globals, n))
	t.Tables = add(t.Tables, mul(u.Tables, n))
	t.TableElements = add(t.TableElements, mul(u.TableElements, n))
	t.Memories = add(t.Memories, mul(u.Memories, n))
	t.MemoryBytes = add(t.MemoryBytes, mul(u.MemoryBytes, n))
	t.DataBytes = add(t.DataBytes, mul(u.DataBytes, n))
	t.ElemEntries = add(t.ElemEntries, mul(u.ElemEntries, n))
	t.HostBytes = add(t.HostBytes, mul(u.HostBytes, n))
}

// Stats is what Scan found.
type Stats struct {
	// Modules lists every core module in the binary, at any depth, in
	// the order they appear.
	Modules []Module
	// Components counts nested component definitions.
	Components int
	// Totals is the state one instantiation of the whole component holds.
	Totals
}

// summary is what one instantiation of a component costs: known totals,
// plus instantiations of core modules that cannot be named statically (a
// module the component imports, or one a component instance exports). Each
// of those is charged as the largest module in the binary once the whole
// binary has been read: a module a nested component receives must be defined
// somewhere in it. (A top-level module import cannot be satisfied by
// maiden's linker at all.)
type summary struct {
	known   Totals
	unnamed uint64
}

func (s *summary) addTimes(u *summary, n uint64) {
	s.known.addTimes(&u.known, n)
	s.unnamed = add(s.unnamed, mul(u.unnamed, n))
}

// scope is one component definition being read: its index spaces of core
// modules (an index into scanner.modules, or -1 when not known statically)
// and of components (nil when not known statically).
type scope struct {
	modules    []int
	components []*summary
	self       summary
}

type scanner struct {
	costs   *Costs
	modules []Module
	nested  int
	scopes  []*scope
}

// Scan reads a component binary and adds up the state its instantiation
// creates in the host, without compiling or instantiating anything. Time and
// memory are linear in len(b): nothing is allocated or looped over on a count
// the bytes do not back. It fails with ErrMalformed on bytes that are not a
// well-formed component and with ErrUnbounded on a component whose
// instantiations cannot be known before it runs.
func Scan(b []byte) (Stats, error) { return DefaultCosts.Scan(b) }

// Scan is the package-level Scan with these costs for the HostBytes estimate.
func (c *Costs) Scan(b []byte) (Stats, error) {
	s := &scanner{costs: c}
	r := &reader{b: b}
	if len(b) < 8 || string(b[:4]) != "\x00asm" {
		return Stats{}, fmt.Errorf("%w: not a WebAssembly component (no WebAssembly magic number)", ErrMalformed)
	}
	if b[6] != 1 || b[7] != 0 {
		return Stats{}, fmt.Errorf("%w: not a WebAssembly component (a core module, or an unknown layer %d)", ErrMalformed, b[6])
	}
	top, err := s.component(r)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Modules: s.modules, Components: s.nested, Totals: top.known}
	if top.unnamed > 0 {
		var largest Module
		for _, m := range s.modules {
			largest = maxModule(largest, m)
		}
		var one Totals
		one.addModule(&largest, c)
		st.Totals.addTimes(&one, top.unnamed)
	}
	return st, nil
}

// maxModule is the field-wise maximum: an instance of any module in the
// binary holds no more of anything than this.
func maxModule(a, b Module) Module {
	return Module{
		Size:          max(a.Size, b.Size),
		Functions:     max(a.Functions, b.Functions),
		Imports:       max(a.Imports, b.Imports),
		Globals:       max(a.Globals, b.Globals),
		Tables:        max(a.Tables, b.Tables),
		TableElements: max(a.TableElements, b.TableElements),
		Memories:      max(a.Memories, b.Memories),
		MemoryBytes:   max(a.MemoryBytes, b.MemoryBytes),
		DataBytes:     max(a.DataBytes, b.DataBytes),
		ElemEntries:   max(a.ElemEntries, b.ElemEntries),
	}
}

// component reads one component (preamble and sections) and returns what one
// instantiation of it costs.
func (s *scanner) component(r *reader) (*summary, error) {
	if len(s.scopes) >= maxDepth {
		return nil, fmt.Errorf("%w: at byte %d: components nested more than %d deep", ErrMalformed, r.base, maxDepth)
	}
	if r.remaining() < 8 || string(r.b[:4]) != "\x00asm" || r.b[6] != 1 || r.b[7] != 0 {
		r.fail("nested component does not start with a component preamble")
		return nil, r.err
	}
	r.off = 8
	sc := &scope{}
	s.scopes = append(s.scopes, sc)
	defer func() { s.scopes = s.scopes[:len(s.scopes)-1] }()
	for !r.done() {
		id := r.byte()
		sec := r.take(r.u32(), "component section")
		if r.err != nil {
			break
		}
		sc.self.known.Definitions = add(sc.self.known.Definitions, definitions(id, sec))
		switch id {
		case 1:
			m := scanModule(sec)
			if sec.err == nil {
				sc.modules = append(sc.modules, len(s.modules))
				s.modules = append(s.modules, m)
			}
		case 2:
			s.coreInstances(sec, sc)
		case 4:
			s.nested++
			child, err := s.component(sec)
			if err != nil {
				return nil, err
			}
			sc.components = append(sc.components, child)
		case 5:
			if err := s.instances(sec, sc); err != nil {
				return nil, err
			}
		case 6:
			s.aliases(sec, sc)
		case 8:
			// Like a module's globals, the count of a valid component is
			// exact; the entries need no decoding.
			n := uint64(sec.count("canonical function", 1))
			sc.self.known.CanonFunctions = add(sc.self.known.CanonFunctions, n)
			sc.self.known.HostBytes = add(sc.self.known.HostBytes, mul(n, s.costs.Canon))
			sec.off = len(sec.b)
		case 10:
			imports(sec, sc)
		case 11:
			exports(sec, sc)
		default:
			// Custom sections, types, start and values define no core
			// modules, components or instances.
			sec.off = len(sec.b)
		}
		r.finish(sec, fmt.Sprintf("component section %d", id))
	}
	if r.err != nil {
		return nil, r.err
	}
	return &sc.self, nil
}

// definitions returns how many definitions a component section holds: one
// for a module or component, the vector's length for the others, none for
// custom sections. It reads a copy of sec, so the section's decoder starts at
// its beginning.
func definitions(id byte, sec *reader) uint64 {
	switch id {
	case 0:
		return 0
	case 1, 4, 9:
		return 1
	}
	peek := *sec
	n := peek.count("definition", 1)
	if peek.err != nil {
		sec.err = peek.err
	}
	return uint64(n)
}

func (s *scanner) coreInstances(r *reader, sc *scope) {
	n := r.count("core instance", 2)
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch kind := r.byte(); kind {
		case 0x00: // instantiate a module
			idx := r.u32()
			args := r.count("instantiation argument", 3)
			for j := uint32(0); j < args && r.err == nil; j++ {
				r.name()
				if r.byte() != 0x12 {
					r.fail("core instantiation argument is not an instance")
				}
				r.u32()
			}
			if r.err != nil {
				return
			}
			if uint64(idx) >= uint64(len(sc.modules)) {
				r.fail("core instance %d instantiates module %d of %d", i, idx, len(sc.modules))
				return
			}
			if m := sc.modules[idx]; m < 0 {
				sc.self.unnamed = add(sc.self.unnamed, 1)
			} else {
				sc.self.known.addModule(&s.modules[m], s.costs)
			}
		case 0x01: // a bag of exports: no state of its own
			exps := r.count("core export", 3)
			for j := uint32(0); j < exps && r.err == nil; j++ {
				r.name()
				coreSort(r)
				r.u32()
			}
		default:
			r.fail("unknown core instance kind 0x%02x", kind)
		}
	}
}

func (s *scanner) instances(r *reader, sc *scope) error {
	n := r.count("instance", 2)
	for i := uint32(0); i < n && r.err == nil; i++ {
		switch kind := r.byte(); kind {
		case 0x00: // instantiate a component
			idx := r.u32()
			args := r.count("instantiation argument", 3)
			for j := uint32(0); j < args && r.err == nil; j++ {
				r.name()
				readSort(r)
				r.u32()
			}
			if r.err != nil {
				return r.err
			}
			if uint64(idx) >= uint64(len(sc.components)) {
				r.fail("instance %d instantiates component %d of %d", i, idx, len(sc.components))
				return r.err
			}
			c := sc.components[idx]
			if c == nil {
				return fmt.Errorf("%w: at byte %d: instance %d instantiates component %d, which the component imports or takes from another instance, so what it creates is unknown until it runs",
					ErrUnbounded, r.base+r.off, i, idx)
			}
			sc.self.addTimes(c, 1)
		case 0x01: // a bag of exports
			exps := r.count("export", 3)
			for j := uint32(0); j < exps && r.err == nil; j++ {
				nameAttributes(r)
				readSort(r)
				r.u32()
			}
		default:
			r.fail("unknown instance kind 0x%02x", kind)
		}
	}
	return r.err
}

const (
	sortCore      = 0x00
	sortComponent = 0x04
	coreModule    = 0x11
)

func (s *scanner) aliases(r *reader, sc *scope) {
	n := r.count("alias", 3)
	for i := uint32(0); i < n && r.err == nil; i++ {
		srt, core := readSort(r)
		isModule := srt == sortCore && core == coreModule
		isComponent := srt == sortComponent
		switch target := r.byte(); target {
		case 0x00: // export of a component instance
			r.u32()
			r.name()
			if isModule {
				sc.modules = append(sc.modules, -1)
			}
			if isComponent {
				sc.components = append(sc.components, nil)
			}
		case 0x01: // export of a core instance: functions, tables, memories, globals
			r.u32()
			r.name()
		case 0x02: // outer
			ct, idx := r.u32(), r.u32()
			if r.err != nil {
				return
			}
			if uint64(ct) >= uint64(len(s.scopes)) {
				r.fail("outer alias %d reaches %d components out, only %d enclose it", i, ct, len(s.scopes)-1)
				return
			}
			outer := s.scopes[len(s.scopes)-1-int(ct)]
			switch {
			case isModule && uint64(idx) < uint64(len(outer.modules)):
				sc.modules = append(sc.modules, outer.modules[idx])
			case isComponent && uint64(idx) < uint64(len(outer.components)):
				sc.components = append(sc.components, outer.components[idx])
			case isModule, isComponent:
				r.fail("outer alias %d names index %d, which does not exist", i, idx)
			}
		default:
			r.fail("unknown alias target 0x%02x", target)
		}
	}
}

func imports(r *reader, sc *scope) {
	n := r.count("import", 3)
	for i := uint32(0); i < n && r.err == nil; i++ {
		nameAttributes(r)
		switch externType(r) {
		case 0x00:
			sc.modules = append(sc.modules, -1)
		case 0x04:
			sc.components = append(sc.components, nil)
		}
	}
}

func exports(r *reader, sc *scope) {
	n := r.count("export", 3)
	for i := uint32(0); i < n && r.err == nil; i++ {
		nameAttributes(r)
		srt, core := readSort(r)
		idx := r.u32()
		switch opt := r.byte(); opt {
		case 0x00:
		case 0x01:
			externType(r)
		default:
			r.fail("unknown export type flag 0x%02x", opt)
		}
		if r.err != nil {
			return
		}
		// Every export adds an index that aliases what it exports.
		switch {
		case srt == sortCore && core == coreModule:
			if uint64(idx) >= uint64(len(sc.modules)) {
				r.fail("export %d names module %d of %d", i, idx, len(sc.modules))
				return
			}
			sc.modules = append(sc.modules, sc.modules[idx])
		case srt == sortComponent:
			if uint64(idx) >= uint64(len(sc.components)) {
				r.fail("export %d names component %d of %d", i, idx, len(sc.components))
				return
			}
			sc.components = append(sc.components, sc.components[idx])
		}
	}
}

// readSort reads a sort; core is the core sort when s is sortCore.
func readSort(r *reader) (s, core byte) {
	s = r.byte()
	switch s {
	case sortCore:
		core = coreSort(r)
	case 0x01, 0x02, 0x03, 0x04, 0x05:
	default:
		r.fail("unknown sort 0x%02x", s)
	}
	return s, core
}

func coreSort(r *reader) byte {
	c := r.byte()
	switch c {
	case 0x00, 0x01, 0x02, 0x03, 0x04, 0x10, 0x11, 0x12:
	default:
		r.fail("unknown core sort 0x%02x", c)
	}
	return c
}

// nameAttributes skips an import or export name with its attributes.
func nameAttributes(r *reader) {
	switch kind := r.byte(); kind {
	case 0x00, 0x01:
		r.name()
	case 0x02:
		r.name()
		n := r.count("name attribute", 2)
		for i := uint32(0); i < n && r.err == nil; i++ {
			switch a := r.byte(); a {
			case 0x00, 0x01, 0x02:
				r.name()
			default:
				r.fail("unknown name attribute 0x%02x", a)
			}
		}
	default:
		r.fail("unknown name encoding 0x%02x", kind)
	}
}

// externType skips an extern type and returns its kind byte (0x00 for a core
// module, 0x04 for a component).
func externType(r *reader) byte {
	kind := r.byte()
	switch kind {
	case 0x00:
		if r.byte() != coreModule {
			r.fail("core extern type is not a module")
		}
		r.u32()
	case 0x01, 0x04, 0x05:
		r.u32()
	case 0x02: // value bound
		switch b := r.byte(); b {
		case 0x00:
			r.u32()
		case 0x01:
			r.sleb(33)
		default:
			r.fail("unknown value bound 0x%02x", b)
		}
	case 0x03: // type bound
		switch b := r.byte(); b {
		case 0x00:
			r.u32()
		case 0x01:
		default:
			r.fail("unknown type bound 0x%02x", b)
		}
	default:
		r.fail("unknown extern type 0x%02x", kind)
	}
	return kind
}

func add(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

func mul(a, b uint64) uint64 {
	if a != 0 && b > ^uint64(0)/a {
		return ^uint64(0)
	}
	return a * b
}
