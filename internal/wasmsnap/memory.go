package wasmsnap

import "fmt"

const secMemory = 5

// MemoryMax reports the maximum, in 64 KiB pages, of the one linear memory
// core defines, and whether it has one. A module with no memory section,
// or with more than one memory, a 64-bit or a shared one, is an error: a
// Go or JS reactor defines exactly one 32-bit unshared memory, and a pass
// that does not understand a memory must not guess.
func MemoryMax(core []byte) (max uint32, has bool, err error) {
	m, err := parse(core)
	if err != nil {
		return 0, false, err
	}
	_, max, has, err = m.memory()
	return max, has, err
}

// SetMemoryMax returns core with its one memory's maximum set to max pages
// (has false: no maximum), its minimum kept; a minimum above max is an
// error.
func SetMemoryMax(core []byte, max uint32, has bool) ([]byte, error) {
	m, err := parse(core)
	if err != nil {
		return nil, err
	}
	min, _, _, err := m.memory()
	if err != nil {
		return nil, err
	}
	if has && min > max {
		return nil, fmt.Errorf("wasmsnap: the memory's minimum of %d pages is above the maximum of %d asked", min, max)
	}
	body := []byte{1, 0}
	body = appendU32(body, min)
	if has {
		body[1] = 1
		body = appendU32(body, max)
	}
	m.sections[m.find(secMemory)].body = body
	return m.encode(), nil
}

// memory reads the memory section's one memory.
func (m *module) memory() (min, max uint32, has bool, err error) {
	i := m.find(secMemory)
	if i < 0 {
		return 0, 0, false, fmt.Errorf("wasmsnap: the module defines no memory")
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	flags := r.byte()
	if r.err == nil && n != 1 {
		return 0, 0, false, fmt.Errorf("wasmsnap: the module defines %d memories, not one", n)
	}
	if r.err == nil && flags&^1 != 0 {
		return 0, 0, false, fmt.Errorf("wasmsnap: the module's memory has flags %#x (64-bit or shared), not a plain 32-bit one", flags)
	}
	min = r.u32()
	if flags&1 != 0 {
		max, has = r.u32(), true
	}
	if r.err == nil && r.i != len(r.b) {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return 0, 0, false, fmt.Errorf("wasmsnap: memory section: %w", r.err)
	}
	return min, max, has, nil
}
