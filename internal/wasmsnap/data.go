package wasmsnap

import (
	"fmt"
	"slices"
)

// DataStats describes a module's data segments.
type DataStats struct {
	Segments int // all data segments
	Bytes    int // their total size
}

// Stats counts the data segments of a core module.
func Stats(core []byte) (DataStats, error) {
	m, err := parse(core)
	if err != nil {
		return DataStats{}, err
	}
	segs, _, err := m.dataSegments()
	if err != nil {
		return DataStats{}, err
	}
	s := DataStats{Segments: len(segs)}
	for _, d := range segs {
		s.Bytes += len(d.data)
	}
	return s, nil
}

type dataSegment struct {
	offset uint32
	data   []byte
}

// dataSegments returns the module's data segments if every one is active,
// in memory 0, at an i32.const offset; ok is false otherwise (a passive
// segment is addressed by its index, which merging would change).
func (m *module) dataSegments() (segs []dataSegment, ok bool, err error) {
	i := m.find(secData)
	if i < 0 {
		return nil, true, nil
	}
	r := &reader{b: m.sections[i].body}
	n := r.u32()
	ok = true
	for k := uint32(0); k < n && r.err == nil; k++ {
		flags := r.u32()
		var off int64
		switch flags {
		case 0, 2:
			if flags == 2 && r.u32() != 0 {
				ok = false
			}
			if op := r.byte(); op != 0x41 {
				ok = false
				// skip a constant expression of one instruction
				switch op {
				case 0x42:
					r.sleb()
				case 0x23:
					r.u32()
				default:
					return nil, false, fmt.Errorf("wasmsnap: data segment %d: offset expression opcode %#x", k, op)
				}
			} else {
				off = r.sleb()
			}
			if r.byte() != 0x0b {
				return nil, false, fmt.Errorf("wasmsnap: data segment %d: offset expression of more than one instruction", k)
			}
		case 1:
			ok = false
		default:
			return nil, false, fmt.Errorf("wasmsnap: data segment %d: unknown flags %d", k, flags)
		}
		data := r.bytes(int(r.u32()))
		segs = append(segs, dataSegment{uint32(off), data})
	}
	if r.err != nil {
		return nil, false, fmt.Errorf("wasmsnap: data section: %w", r.err)
	}
	return segs, ok, nil
}

// Coalesce merges active data segments of memory 0 whose gap is at most
// maxGap bytes into one segment (the gap filled with zeros, which is what
// fresh memory holds). A module whose segments overlap, are passive or
// address other memories comes back unchanged. Each segment costs a
// bounds check and a copy call at every instantiation on an engine without
// copy-on-write memory images; zeros in a gap cost a little more copying.
func Coalesce(core []byte, maxGap int) ([]byte, error) {
	m, err := parse(core)
	if err != nil {
		return nil, err
	}
	segs, ok, err := m.dataSegments()
	if err != nil || !ok || len(segs) < 2 {
		return core, err
	}
	slices.SortStableFunc(segs, func(a, b dataSegment) int {
		switch {
		case a.offset < b.offset:
			return -1
		case a.offset > b.offset:
			return 1
		}
		return 0
	})
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i-1].offset)+uint64(len(segs[i-1].data)) > uint64(segs[i].offset) {
			return core, nil // overlapping: order matters, leave it
		}
	}
	var merged []dataSegment
	cur := dataSegment{segs[0].offset, append([]byte(nil), segs[0].data...)}
	for _, s := range segs[1:] {
		end := cur.offset + uint32(len(cur.data))
		if gap := int(s.offset - end); gap <= maxGap {
			cur.data = append(cur.data, make([]byte, gap)...)
			cur.data = append(cur.data, s.data...)
			continue
		}
		merged = append(merged, cur)
		cur = dataSegment{s.offset, append([]byte(nil), s.data...)}
	}
	merged = append(merged, cur)

	body := appendU32(nil, uint32(len(merged)))
	for _, s := range merged {
		body = append(body, 0x00, 0x41)
		body = appendS64(body, int64(int32(s.offset)))
		body = append(body, 0x0b)
		body = appendU32(body, uint32(len(s.data)))
		body = append(body, s.data...)
	}
	m.sections[m.find(secData)].body = body
	if i := m.find(secDataCount); i >= 0 {
		m.sections[i].body = appendU32(nil, uint32(len(merged)))
	}
	return m.encode(), nil
}

// Image returns the bytes the module's active data segments write into
// memory 0 at instantiation, from address 0 to the end of the last
// segment, applied in order (a later segment overwrites an earlier one).
// Two modules with the same image start with the same memory.
func Image(core []byte) ([]byte, error) {
	m, err := parse(core)
	if err != nil {
		return nil, err
	}
	segs, ok, err := m.dataSegments()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("wasmsnap: the module has passive segments or segments with computed offsets")
	}
	var img []byte
	for _, s := range segs {
		end := int(s.offset) + len(s.data)
		if end > len(img) {
			img = append(img, make([]byte, end-len(img))...)
		}
		copy(img[s.offset:], s.data)
	}
	return img, nil
}
