package y3

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The Go types of the reference's marshal_* vectors (see their go_type).

type NoiseData struct {
	Noise float32 `y3:"0x11"`
	Time  int64   `y3:"0x12"`
	From  string  `y3:"0x13"`
}

// NoiseDataDec is NoiseData with decimal struct tags.
type NoiseDataDec struct {
	Noise float32 `y3:"17"`
	Time  int64   `y3:"18"`
	From  string  `y3:"19"`
}

type AllTypes struct {
	S   string  `y3:"0x10"`
	I32 int32   `y3:"0x11"`
	U32 uint32  `y3:"0x12"`
	I64 int64   `y3:"0x13"`
	U64 uint64  `y3:"0x14"`
	F32 float32 `y3:"0x15"`
	F64 float64 `y3:"0x16"`
	B   bool    `y3:"0x17"`
	Bs  []uint8 `y3:"0x18"`
}

type Inner struct {
	Name string  `y3:"0x21"`
	Vals []int32 `y3:"0x22"`
}

type Outer struct {
	ID    int32    `y3:"0x11"`
	In    Inner    `y3:"0x12"`
	Arr   [3]int32 `y3:"0x13"`
	Items []Inner  `y3:"0x14"`
	Tags  []string `y3:"0x15"`
}

type Level1 struct {
	C int32 `y3:"0x33"`
}

type Level2 struct {
	B Level1 `y3:"0x32"`
}

type Level3 struct {
	A Level2 `y3:"0x31"`
}

// goTypeOf maps a marshal vector to the Go type the reference marshalled.
func goTypeOf(t testing.TB, v vector) reflect.Type {
	t.Helper()
	scalar := map[string]reflect.Type{
		"int32": reflect.TypeOf(int32(0)), "int64": reflect.TypeOf(int64(0)),
		"uint32": reflect.TypeOf(uint32(0)), "uint64": reflect.TypeOf(uint64(0)),
		"float32": reflect.TypeOf(float32(0)), "float64": reflect.TypeOf(float64(0)),
		"bool": reflect.TypeOf(false), "string": reflect.TypeOf(""), "bytes": reflect.TypeOf([]byte(nil)),
	}
	if typ, ok := scalar[v.Type]; ok {
		return typ
	}
	structs := map[string]reflect.Type{
		"NoiseData": reflect.TypeOf(NoiseData{}), "AllTypes": reflect.TypeOf(AllTypes{}),
		"Outer": reflect.TypeOf(Outer{}), "Level3": reflect.TypeOf(Level3{}),
	}
	structOf := func() reflect.Type {
		name, _, _ := strings.Cut(strings.TrimPrefix(v.GoType, "[]"), "{")
		typ, ok := structs[name]
		if !ok {
			t.Fatalf("go_type %q", v.GoType)
		}
		return typ
	}
	switch {
	case v.Type == "struct":
		return structOf()
	case v.Type == "slice<struct>":
		return reflect.SliceOf(structOf())
	case strings.HasPrefix(v.Type, "slice<"):
		return reflect.SliceOf(scalar[strings.TrimSuffix(strings.TrimPrefix(v.Type, "slice<"), ">")])
	case v.Type == "array<int32,3>":
		return reflect.TypeOf([3]int32{})
	}
	t.Fatalf("marshal type %q", v.Type)
	return nil
}

// fillFromJSON sets rv from an ordered-JSON value; bytes are hex strings, floats may come
// with their IEEE bits, and empty lists or byte strings are nil (as Unmarshal returns them).
func fillFromJSON(t testing.TB, rv reflect.Value, value any, bits any) {
	t.Helper()
	num := func() string {
		n, ok := value.(json.Number)
		if !ok {
			t.Fatalf("%v: not a number: %v", rv.Type(), value)
		}
		return string(n)
	}
	switch rv.Kind() {
	case reflect.Bool:
		rv.SetBool(value.(bool))
	case reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(num(), 10, 64)
		must(t, err)
		rv.SetInt(x)
	case reflect.Uint32, reflect.Uint64:
		x, err := strconv.ParseUint(num(), 10, 64)
		must(t, err)
		rv.SetUint(x)
	case reflect.Float32, reflect.Float64:
		if b, ok := bits.(string); ok && b != "" {
			x, err := strconv.ParseUint(b, 16, 64)
			must(t, err)
			if rv.Kind() == reflect.Float32 {
				rv.SetFloat(float64(math.Float32frombits(uint32(x))))
			} else {
				rv.SetFloat(math.Float64frombits(x))
			}
			return
		}
		x, err := strconv.ParseFloat(num(), rv.Type().Bits())
		must(t, err)
		rv.SetFloat(x)
	case reflect.String:
		rv.SetString(value.(string))
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			if b := mustHex(t, value.(string)); len(b) > 0 {
				rv.SetBytes(b)
			}
			return
		}
		arr := value.([]any)
		if len(arr) == 0 {
			return
		}
		bitList, _ := bits.([]any)
		rv.Set(reflect.MakeSlice(rv.Type(), len(arr), len(arr)))
		for i, e := range arr {
			var b any
			if i < len(bitList) {
				b = bitList[i]
			}
			fillFromJSON(t, rv.Index(i), e, b)
		}
	case reflect.Array:
		for i, e := range value.([]any) {
			fillFromJSON(t, rv.Index(i), e, nil)
		}
	case reflect.Struct:
		for _, e := range value.(object) {
			f := rv.FieldByName(e.key)
			if !f.IsValid() {
				t.Fatalf("%v has no field %s", rv.Type(), e.key)
			}
			fillFromJSON(t, f, e.val, nil)
		}
	default:
		t.Fatalf("fill %v", rv.Type())
	}
}

func checkMarshalVector(t *testing.T, v vector) {
	key := v.tag()
	if strings.HasPrefix(v.Name, "marshal_forbidden_") {
		_, err := Marshal(key, int32(1))
		want := KindReservedTag
		if key >= 0x40 {
			want = KindInvalidTag
		}
		e := wantKind(t, err, want)
		if e.Tag != key {
			t.Fatalf("%+v", e)
		}
		var x int32
		wantKind(t, Unmarshal([]byte{0x81, 0x00}, key, &x), want)
		return
	}
	typ := goTypeOf(t, v)
	var bits any
	if len(v.Bits) > 0 {
		bits = parseOrdered(t, v.Bits)
	}
	value := reflect.New(typ)
	fillFromJSON(t, value.Elem(), parseOrdered(t, v.Value), bits)
	want := v.bytes(t)
	if v.Hex == "" {
		// The reference panics on a bare Go array; we write it like the slice, as the Rust
		// core does (the y3-extensions.json entry bare_array_int32_3).
		if !strings.Contains(v.Decoded, "panic") || typ.Kind() != reflect.Array {
			t.Fatalf("no hex: %q", v.Decoded)
		}
		want = mustHex(t, "810b d009 000101 000102 000103")
	}
	got, err := Marshal(key, value.Elem().Interface())
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal:\n got %x\nwant %x", got, want)
	}
	// A pointer marshals the same.
	got2, err := Marshal(key, value.Interface())
	must(t, err)
	if !bytes.Equal(got2, want) {
		t.Fatal("Marshal(pointer)")
	}
	back := reflect.New(typ)
	must(t, Unmarshal(want, key, back.Interface()))
	if !deepEqualFloatBits(back.Elem(), value.Elem()) {
		t.Fatalf("Unmarshal:\n got %#v\nwant %#v", back.Elem().Interface(), value.Elem().Interface())
	}
	// The observed packet itself (root stripped), as YoMo's ToObject receives it.
	p, err := Decode(want)
	must(t, err)
	inner, ok, err := p.Child(key)
	must(t, err)
	if !ok {
		t.Fatal("no key packet")
	}
	back2 := reflect.New(typ)
	raw := want[len(want)-inner.EncodedLen():]
	must(t, Unmarshal(raw, key, back2.Interface()))
	if !deepEqualFloatBits(back2.Elem(), value.Elem()) {
		t.Fatal("Unmarshal(root stripped)")
	}
}

func deepEqualFloatBits(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case reflect.Slice:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return false
		}
		fallthrough
	case reflect.Array:
		for i := 0; i < a.Len(); i++ {
			if !deepEqualFloatBits(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !deepEqualFloatBits(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func TestMarshalDecimalTags(t *testing.T) {
	hexTags, err := Marshal(0x10, NoiseData{Noise: 40, Time: 1600000000000, From: "127.0.0.1"})
	must(t, err)
	dec, err := Marshal(0x10, &NoiseDataDec{Noise: 40, Time: 1600000000000, From: "127.0.0.1"})
	must(t, err)
	if !bytes.Equal(hexTags, dec) {
		t.Fatalf("%x != %x", dec, hexTags)
	}
	var back NoiseDataDec
	must(t, Unmarshal(hexTags, 0x10, &back))
	if back.From != "127.0.0.1" || back.Time != 1600000000000 || back.Noise != 40 {
		t.Fatalf("%+v", back)
	}
}

func TestMarshalErrors(t *testing.T) {
	type badKey struct {
		A int32 `y3:"0xzz"`
	}
	var ue *UnsupportedTypeError
	if _, err := Marshal(0x10, badKey{}); !errors.As(err, &ue) {
		t.Fatalf("bad key: %v", err)
	}
	type wide struct {
		A int32 `y3:"0x40"`
	}
	_, err := Marshal(0x10, wide{})
	wantKind(t, err, KindInvalidTag)
	if _, err := Marshal(0x10, map[string]int{}); !errors.As(err, &ue) {
		t.Fatalf("map: %v", err)
	}
	if _, err := Marshal(0x10, nil); !errors.As(err, &ue) {
		t.Fatalf("nil: %v", err)
	}
	// A nil pointer field is omitted, like an empty string.
	type withPtr struct {
		P *int32 `y3:"0x11"`
		Q *int32 `y3:"0x12"`
	}
	five := int32(5)
	b, err := Marshal(0x10, withPtr{Q: &five})
	must(t, err)
	if want := mustHex(t, "8105 9003 120105"); !bytes.Equal(b, want) {
		t.Fatalf("%x", b)
	}
	var back withPtr
	must(t, Unmarshal(b, 0x10, &back))
	if back.P != nil || back.Q == nil || *back.Q != 5 {
		t.Fatalf("%+v", back)
	}
	// Unmarshal shape errors.
	var x int32
	wantKind(t, Unmarshal(mustHex(t, "8104 9002 1100"), 0x10, &x), KindWrongType)
	var s NoiseData
	wantKind(t, Unmarshal(mustHex(t, "8103 100105"), 0x10, &s), KindWrongType)
	var arr [2]int32
	wantKind(t, Unmarshal(mustHex(t, "8105 d003 000101"), 0x10, &arr), KindWrongCount)
	var i8 int8
	wantKind(t, Unmarshal(mustHex(t, "8104 10028100"), 0x10, &i8), KindVarintOverflow)
	var u8 uint8
	must(t, Unmarshal(mustHex(t, "8104 1002817f"), 0x10, &u8))
	if u8 != 255 {
		t.Fatal(u8)
	}
	if err := Unmarshal(mustHex(t, "8103 110105"), 0x10, &x); err != ErrNotFound {
		t.Fatalf("not found: %v", err)
	}
	if err := Unmarshal(mustHex(t, "8103 100105"), 0x10, x); !errors.As(err, &ue) {
		t.Fatalf("non-pointer: %v", err)
	}
	wantKind(t, Unmarshal(mustHex(t, "8103 100105ff"), 0x10, &x), KindTrailingBytes)
	// Unknown keys are skipped, missing fields are zero.
	var nd NoiseData
	nd.From = "stale"
	must(t, Unmarshal(mustHex(t, "8108 9006 3f0101 110100"), 0x10, &nd))
	if nd != (NoiseData{}) {
		t.Fatalf("%+v", nd)
	}
}

func TestMarshalOtherShapes(t *testing.T) {
	type nested struct {
		Grid  [][]int32   `y3:"0x11"`
		Ptrs  []*Level1   `y3:"0x12"`
		Fixed [2]byte     `y3:"0x13"`
		Small int16       `y3:"0x14"`
		Words []string    `y3:"0x15"`
		Any   []NoiseData `y3:"0x16"`
	}
	in := nested{
		Grid:  [][]int32{{1}, {2, 3}},
		Ptrs:  []*Level1{{C: 1}},
		Fixed: [2]byte{0xde, 0xad},
		Small: -300,
		Words: []string{"", "x"},
	}
	b, err := Marshal(0x20, in)
	must(t, err)
	var out nested
	must(t, Unmarshal(b, 0x20, &out))
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("%+v != %+v", out, in)
	}
	// Grid elements are array nodes with key 0 (0xc0).
	p, err := Decode(b)
	must(t, err)
	g, ok, err := p.Find(0x20, 0x11)
	must(t, err)
	if !ok || !g.IsArray() {
		t.Fatal("grid")
	}
	for c, err := range g.Children() {
		must(t, err)
		if !c.IsArray() || c.ID() != 0 {
			t.Fatalf("grid element %v", c.Tag())
		}
	}
	// The other dialects.
	for _, d := range []Dialect{NVarInt, Draft02} {
		c := ConfigFor(d)
		b, err := c.Marshal(0x20, in)
		must(t, err)
		var out nested
		must(t, c.Unmarshal(b, 0x20, &out))
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("%v: %+v != %+v", d, out, in)
		}
	}
}

// A value a struct would omit is omitted under the root too (the root is a node, and the
// reference skips zero-length primitives added to a node): the Rust core and the Python
// binding write the empty root 81 00 as well.
func TestMarshalTopLevelOmitted(t *testing.T) {
	var nilInt *int32
	var nilStruct *NoiseData
	for _, v := range []any{"", []byte{}, []byte(nil), [0]byte{}, nilInt, nilStruct, &nilInt} {
		b, err := Marshal(0x10, v)
		must(t, err)
		if want := mustHex(t, "8100"); !bytes.Equal(b, want) {
			t.Fatalf("%T: %x", v, b)
		}
	}
	b, err := ConfigFor(Draft02).Marshal(0x10, "")
	must(t, err)
	if want := mustHex(t, "0100"); !bytes.Equal(b, want) {
		t.Fatalf("draft02: %x", b)
	}
	var s string
	if err := Unmarshal(mustHex(t, "8100"), 0x10, &s); err != ErrNotFound {
		t.Fatalf("Unmarshal(81 00): %v", err)
	}
	// Keys and types are still checked.
	_, err = Marshal(0x01, "")
	wantKind(t, err, KindReservedTag)
	var nilMap *map[string]int
	var ue *UnsupportedTypeError
	if _, err := Marshal(0x10, nilMap); !errors.As(err, &ue) {
		t.Fatalf("nil *map: %v", err)
	}
	// Zero numbers and a zero-length array of numbers are written.
	b, err = Marshal(0x10, int32(0))
	must(t, err)
	if want := mustHex(t, "8103 100100"); !bytes.Equal(b, want) {
		t.Fatalf("int32 0: %x", b)
	}
	b, err = Marshal(0x10, [0]int32{})
	must(t, err)
	if want := mustHex(t, "8102 d000"); !bytes.Equal(b, want) {
		t.Fatalf("[0]int32: %x", b)
	}
}

// A bare fixed-size array is written like the slice of the same elements (the reference
// panics), and an array of structs like a slice of structs: a plain node.
func TestMarshalBareArrays(t *testing.T) {
	for _, c := range []struct {
		array, slice any
		want         string
	}{
		{[3]int32{1, 2, 3}, []int32{1, 2, 3}, "810b d009 000101 000102 000103"},
		{[2]string{"", "a"}, []string{"", "a"}, "8107 d005 0000 000161"},
		{[1]Level1{{C: 9}}, []Level1{{C: 9}}, "8107 9005 8003 330109"},
	} {
		a, err := Marshal(0x10, c.array)
		must(t, err)
		s, err := Marshal(0x10, c.slice)
		must(t, err)
		if want := mustHex(t, c.want); !bytes.Equal(a, want) || !bytes.Equal(s, want) {
			t.Fatalf("%T: %x, slice %x, want %x", c.array, a, s, want)
		}
		back := reflect.New(reflect.TypeOf(c.array))
		must(t, Unmarshal(a, 0x10, back.Interface()))
		if !reflect.DeepEqual(back.Elem().Interface(), c.array) {
			t.Fatalf("Unmarshal: %v", back.Elem().Interface())
		}
	}
}
