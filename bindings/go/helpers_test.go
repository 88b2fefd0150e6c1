package y3

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const vectorDir = "../../testdata/vectors"

// vector is one entry of the reference vector files (see testdata/vectors/README.md).
type vector struct {
	Name          string          `json:"name"`
	Type          string          `json:"type"`
	Tag           *uint32         `json:"tag"`
	Value         json.RawMessage `json:"value"`
	Bits          json.RawMessage `json:"bits"`
	ValueRecipe   string          `json:"value_recipe"`
	Hex           string          `json:"hex"`
	API           string          `json:"api"`
	Decoded       string          `json:"decoded"`
	Note          string          `json:"note"`
	GoType        string          `json:"go_type"`
	SameAsDraft02 *bool           `json:"same_as_draft02"`
	Draft02Hex    string          `json:"draft02_hex"`

	dialect Dialect
	file    string
}

func (v vector) bytes(t testing.TB) []byte {
	t.Helper()
	return mustHex(t, v.Hex)
}

func (v vector) tag() uint32 {
	if v.Tag == nil {
		return 0
	}
	return *v.Tag
}

type vectorFile struct {
	name    string
	dialect Dialect
}

var vectorFiles = []vectorFile{
	{"y3-codec-golang-v1.7.3.json", Golang},
	{"yomorun-y3-v1.0.5.json", NVarInt},
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	var all []vector
	for _, f := range vectorFiles {
		raw, err := os.ReadFile(filepath.Join(vectorDir, f.name))
		if err != nil {
			t.Fatalf("read vectors: %v", err)
		}
		var vs []vector
		if err := json.Unmarshal(raw, &vs); err != nil {
			t.Fatalf("parse %s: %v", f.name, err)
		}
		if len(vs) == 0 {
			t.Fatalf("%s: no vectors", f.name)
		}
		for i := range vs {
			vs[i].dialect = f.dialect
			vs[i].file = f.name
		}
		all = append(all, vs...)
	}
	return all
}

type malformed struct {
	Name     string `json:"name"`
	Lib      string `json:"lib"`
	Call     string `json:"call"`
	InputHex string `json:"input_hex"`
	Outcome  string `json:"outcome"`
}

func loadMalformed(t testing.TB) []malformed {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorDir, "malformed-behaviour.json"))
	if err != nil {
		t.Fatalf("read malformed: %v", err)
	}
	var ms []malformed
	if err := json.Unmarshal(raw, &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

func kindOf(err error) Kind {
	if err == nil {
		return ""
	}
	if k := KindOf(err); k != "" {
		return k
	}
	return Kind("other: " + err.Error())
}

func wantKind(t testing.TB, err error, want Kind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s, got no error", want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind != want {
		t.Fatalf("want %s, got %v", want, err)
	}
	sentinel := map[Kind]error{
		KindUnexpectedEnd: ErrUnexpectedEnd, KindTooLong: ErrTooLong, KindTooDeep: ErrTooDeep,
		KindNegativeLength: ErrNegativeLength, KindVarintOverflow: ErrVarintOverflow,
		KindVarintUnterminated: ErrVarintUnterminated, KindChildOverflow: ErrChildOverflow,
		KindTruncatedHeader: ErrTruncatedHeader, KindInvalidTag: ErrInvalidTag,
		KindInvalidUTF8: ErrInvalidUTF8, KindInvalidLength: ErrInvalidLength,
		KindInvalidBool: ErrInvalidBool, KindWrongType: ErrWrongType, KindWrongCount: ErrWrongCount,
		KindTrailingBytes: ErrTrailingBytes, KindReservedTag: ErrReservedTag,
		KindBufferTooSmall: ErrBufferTooSmall, KindEmptyPath: ErrEmptyPath,
		KindPathTooDeep: ErrPathTooDeep, KindPathCount: ErrPathCount, KindPathOverlap: ErrPathOverlap,
		KindPathSyntax: ErrPathSyntax,
	}[want]
	if sentinel == nil || !errors.Is(err, sentinel) {
		t.Fatalf("errors.Is(%v, sentinel %s) is false", err, want)
	}
	if e.Error() == "" {
		t.Fatal("empty message")
	}
	return e
}

// ordered JSON: objects keep their key order.
type kv struct {
	key string
	val any
}

type object []kv

func parseOrdered(t testing.TB, raw json.RawMessage) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readOrdered(dec)
	if err != nil {
		t.Fatalf("ordered json: %v", err)
	}
	return v
}

func readOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			var obj object
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := readOrdered(dec)
				if err != nil {
					return nil, err
				}
				obj = append(obj, kv{k.(string), v})
			}
			_, err := dec.Token()
			return obj, err
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := readOrdered(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			_, err := dec.Token()
			return arr, err
		}
		return nil, fmt.Errorf("unexpected delim %v", tok)
	default:
		return tok, nil
	}
}

// scalarItem builds the Value of a scalar vector from value / bits / value_recipe.
func scalarValue(t testing.TB, typ string, value any, bits string, recipe string) Value {
	t.Helper()
	num := func() json.Number {
		n, ok := value.(json.Number)
		if !ok {
			t.Fatalf("%s value %v is not a number", typ, value)
		}
		return n
	}
	switch typ {
	case "int32":
		v, err := strconv.ParseInt(string(num()), 10, 32)
		must(t, err)
		return Int32(v)
	case "int64":
		v, err := strconv.ParseInt(string(num()), 10, 64)
		must(t, err)
		return Int64(v)
	case "uint32":
		v, err := strconv.ParseUint(string(num()), 10, 32)
		must(t, err)
		return Uint32(v)
	case "uint64":
		v, err := strconv.ParseUint(string(num()), 10, 64)
		must(t, err)
		return Uint64(v)
	case "float32":
		if bits != "" {
			b, err := strconv.ParseUint(bits, 16, 32)
			must(t, err)
			return Float32(math.Float32frombits(uint32(b)))
		}
		v, err := strconv.ParseFloat(string(num()), 32)
		must(t, err)
		return Float32(v)
	case "float64":
		if bits != "" {
			b, err := strconv.ParseUint(bits, 16, 64)
			must(t, err)
			return Float64(math.Float64frombits(b))
		}
		v, err := strconv.ParseFloat(string(num()), 64)
		must(t, err)
		return Float64(v)
	case "bool":
		b, ok := value.(bool)
		if !ok {
			t.Fatalf("bool value %v", value)
		}
		return Bool(b)
	case "string":
		if recipe != "" {
			return String(fromRecipe(t, recipe))
		}
		s, ok := value.(string)
		if !ok {
			t.Fatalf("string value %v", value)
		}
		return String(s)
	case "bytes":
		s, ok := value.(string)
		if !ok {
			t.Fatalf("bytes value %v", value)
		}
		return Bytes(mustHex(t, s))
	}
	t.Fatalf("unknown scalar type %q", typ)
	return nil
}

// fromRecipe expands "repeat 'a' 16384".
func fromRecipe(t testing.TB, recipe string) string {
	t.Helper()
	var ch string
	var n int
	if _, err := fmt.Sscanf(recipe, "repeat '%1s' %d", &ch, &n); err != nil {
		t.Fatalf("recipe %q: %v", recipe, err)
	}
	return strings.Repeat(ch, n)
}

// c63Items is the published report's C63 data set: keys 1..63 ascending, values by
// (k-1)%7: string "a", int32 -65, uint32 128, int64 -1, uint64 max, float32 0.25, float64 23.
func c63Items() []Item {
	items := make([]Item, 0, 63)
	for k := uint32(1); k <= 63; k++ {
		var v Value
		switch (k - 1) % 7 {
		case 0:
			v = String("a")
		case 1:
			v = Int32(-65)
		case 2:
			v = Uint32(128)
		case 3:
			v = Int64(-1)
		case 4:
			v = Uint64(math.MaxUint64)
		case 5:
			v = Float32(0.25)
		case 6:
			v = Float64(23)
		}
		items = append(items, Item{ID: k, Value: v})
	}
	return items
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func parseKeyT(t testing.TB, s string) uint32 {
	t.Helper()
	k, err := parseKey(s)
	if err != nil {
		t.Fatalf("key %q: %v", s, err)
	}
	return k
}

var scalarTypes = map[string]bool{
	"int32": true, "int64": true, "uint32": true, "uint64": true, "float32": true,
	"float64": true, "bool": true, "string": true, "bytes": true,
}

// nodeSchema turns a vector's node value ({"0x11": {"int32": 1}, "0x03": {"0x04": ...}}, or
// a list of int32 elements) into items.
func nodeSchema(t testing.TB, value any) []Item {
	t.Helper()
	switch v := value.(type) {
	case object:
		items := make([]Item, 0, len(v))
		for _, e := range v {
			id := parseKeyT(t, e.key)
			child, ok := e.val.(object)
			if !ok {
				t.Fatalf("node child %s: %v", e.key, e.val)
			}
			if len(child) == 1 && scalarTypes[child[0].key] {
				items = append(items, Item{ID: id, Value: scalarValue(t, child[0].key, child[0].val, "", "")})
			} else {
				items = append(items, Item{ID: id, Value: Node(nodeSchema(t, child))})
			}
		}
		return items
	case []any:
		items := make([]Item, 0, len(v))
		for _, e := range v {
			items = append(items, Item{ID: 0, Value: scalarValue(t, "int32", e, "", "")})
		}
		return items
	}
	t.Fatalf("node value %T", value)
	return nil
}

// valueEqual compares two values, floats by bits.
func valueEqual(a, b Value) bool {
	switch x := a.(type) {
	case Float32:
		y, ok := b.(Float32)
		return ok && math.Float32bits(float32(x)) == math.Float32bits(float32(y))
	case Float64:
		y, ok := b.(Float64)
		return ok && math.Float64bits(float64(x)) == math.Float64bits(float64(y))
	case Bytes:
		y, ok := b.(Bytes)
		return ok && bytes.Equal(x, y)
	case Node:
		y, ok := b.(Node)
		return ok && itemsEqual(x, y)
	case Array:
		y, ok := b.(Array)
		return ok && itemsEqual(x, y)
	}
	return a == b
}

func itemsEqual(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !valueEqual(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// readScalar reads p with the accessor of v's type.
func readScalar(p Packet, like Value) (Value, error) {
	it, err := ReadItem(p, like)
	if err != nil {
		return nil, err
	}
	return it.Value, nil
}
