package wasmtime

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// normalize makes a value comparable after a round trip: a list<u8> comes
// back in Bytes, whichever field it went out in, and empty slices come back
// nil.
func normalize(v Val) Val {
	// Case means something only for variants and enums, OK only for results.
	if v.Kind != KindVariant && v.Kind != KindEnum {
		v.Case = ""
	}
	if v.Kind != KindResult {
		v.OK = false
	}
	switch v.Kind {
	case KindList:
		if b, ok := v.AsBytes(); ok && (len(v.List) > 0 || v.Bytes != nil) {
			v.Bytes, v.List = b, nil
		}
		if len(v.Bytes) == 0 {
			v.Bytes = nil
		}
	}
	if len(v.List) == 0 {
		v.List = nil
	}
	for i := range v.List {
		v.List[i] = normalize(v.List[i])
	}
	if len(v.Fields) == 0 {
		v.Fields = nil
	}
	for i := range v.Fields {
		v.Fields[i].Val = normalize(v.Fields[i].Val)
	}
	if len(v.Flags) == 0 {
		v.Flags = nil
	}
	if v.Payload != nil {
		p := normalize(*v.Payload)
		v.Payload = &p
	}
	return v
}

func TestValRoundTrip(t *testing.T) {
	str := String("héllo")
	tests := map[string]Val{
		"bool":        Bool(true),
		"s8 min":      {Kind: KindS8, Int: math.MinInt8},
		"s16":         {Kind: KindS16, Int: -1234},
		"s32":         S32(math.MinInt32),
		"s64":         {Kind: KindS64, Int: math.MinInt64},
		"u8":          U8(255),
		"u16":         U16(65535),
		"u32":         U32(math.MaxUint32),
		"u64":         {Kind: KindU64, Uint: math.MaxUint64},
		"f32":         {Kind: KindF32, Float: 1.5},
		"f64":         {Kind: KindF64, Float: math.Pi},
		"char":        {Kind: KindChar, Char: '✓'},
		"empty str":   String(""),
		"string":      str,
		"bytes":       Bytes([]byte{0, 1, 2, 255}),
		"empty bytes": Bytes(nil),
		"u8 list":     List(U8(1), U8(2)),
		"mixed list":  List(String("a"), String("b")),
		"tuple":       Tuple(String("k"), String("v")),
		"record": Record(FieldOf("status", U16(200)),
			FieldOf("headers", List(Tuple(String("a"), String("b")))),
			FieldOf("body", Bytes([]byte("xyz")))),
		"empty record": Record(),
		"enum":         Enum("warn"),
		"variant":      Variant("denied", &str),
		"variant none": Variant("timeout", nil),
		"some":         Some(String("TOKEN")),
		"none":         None(),
		"ok":           Ok(&str),
		"err empty":    Err(nil),
		"flags":        {Kind: KindFlags, Flags: []string{"a", "b"}},
	}
	for name, v := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := roundTrip(v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(normalize(v), normalize(got)); diff != "" {
				t.Errorf("round trip changed the value (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValRejected(t *testing.T) {
	deep := String("x")
	for i := 0; i < maxDepth+5; i++ {
		d := deep
		deep = Some(d)
	}
	tests := map[string]Val{
		"s8 range":       {Kind: KindS8, Int: 128},
		"u16 range":      {Kind: KindU16, Uint: 1 << 16},
		"bad utf8":       String("\xff"),
		"surrogate char": {Kind: KindChar, Char: 0xD800},
		"bytes and list": {Kind: KindList, Bytes: []byte{1}, List: []Val{U8(1)}},
		"unknown kind":   {Kind: 99},
		"too deep":       deep,
	}
	for name, v := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := roundTrip(v); !errors.Is(err, ErrValue) {
				t.Fatalf("got %v, want ErrValue", err)
			}
		})
	}
}

func TestBigByteList(t *testing.T) {
	b := []byte(strings.Repeat("0123456789abcdef", (2<<20)/16))
	got, err := roundTrip(Bytes(b))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Bytes) != string(b) {
		t.Fatal("2 MiB list<u8> changed in the round trip")
	}
}

// valFromBytes builds an arbitrary (possibly invalid) value tree from fuzz
// input, consuming it as it goes.
func valFromBytes(b *[]byte, depth int) Val {
	next := func() byte {
		if len(*b) == 0 {
			return 0
		}
		c := (*b)[0]
		*b = (*b)[1:]
		return c
	}
	str := func() string {
		n := int(next() % 8)
		if n > len(*b) {
			n = len(*b)
		}
		s := string((*b)[:n])
		*b = (*b)[n:]
		return s
	}
	k := Kind(next() % 23)
	v := Val{Kind: k}
	switch k {
	case KindBool:
		v.Bool = next()&1 == 1
	case KindS8, KindS16, KindS32, KindS64:
		v.Int = int64(int8(next())) << (next() % 60)
	case KindU8, KindU16, KindU32, KindU64:
		v.Uint = uint64(next()) << (next() % 60)
	case KindF32:
		// f32 crosses as a float32; only representable values round-trip.
		v.Float = float64(float32(float64(next()) / 3))
	case KindF64:
		v.Float = float64(next()) / 3
	case KindChar:
		v.Char = rune(next()) << (next() % 16)
	case KindString:
		v.Str = str()
	case KindEnum:
		v.Case = str()
	case KindList, KindTuple:
		if depth < 6 {
			n := int(next() % 4)
			for i := 0; i < n; i++ {
				v.List = append(v.List, valFromBytes(b, depth+1))
			}
		}
		if k == KindList && next()%3 == 0 {
			v.Bytes = []byte(str())
		}
	case KindRecord:
		if depth < 6 {
			n := int(next() % 4)
			for i := 0; i < n; i++ {
				v.Fields = append(v.Fields, Field{Name: str(), Val: valFromBytes(b, depth+1)})
			}
		}
	case KindVariant, KindOption, KindResult:
		v.Case = str()
		v.OK = next()&1 == 1
		if depth < 6 && next()&1 == 1 {
			p := valFromBytes(b, depth+1)
			v.Payload = &p
		}
	case KindFlags:
		n := int(next() % 3)
		for i := 0; i < n; i++ {
			v.Flags = append(v.Flags, str())
		}
	}
	return v
}

// FuzzValRoundTrip checks the conversion in both directions: any value is
// either refused with ErrValue before C memory is touched, or survives the
// trip to wasmtime's representation and back unchanged. Run under the race
// detector or ASan builds this is also the leak and double-free check.
func FuzzValRoundTrip(f *testing.F) {
	f.Add([]byte{byte(KindRecord), 2, 3, 'a', 'b', 'c', byte(KindString), 2, 'h', 'i'})
	f.Add([]byte{byte(KindList), 3, byte(KindU8), 7, 0, byte(KindU8), 9, 0})
	f.Add([]byte{byte(KindResult), 0, 1, 1, byte(KindString), 1, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		v := valFromBytes(&data, 0)
		got, err := roundTrip(v)
		if err != nil {
			if !errors.Is(err, ErrValue) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		want := normalize(v)
		if diff := cmp.Diff(want, normalize(got)); diff != "" {
			t.Fatalf("round trip changed %+v (-want +got):\n%s", v, diff)
		}
	})
}
