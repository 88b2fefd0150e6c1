package y3

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Typed Marshal / Unmarshal, byte-exact with the reference NewCodec(key).Marshal(v) of
// github.com/yomorun/y3-codec-golang v1.7.3:
//
//	root node 0x81 { value packet with key }
//
//	scalar            primitive key (int*, uint*, float*, bool, string, []byte)
//	struct            node 0x80|key, fields in declaration order under their y3:"0x11" keys;
//	                  numbers and bools always written, empty string and empty []byte fields
//	                  omitted (so are nil pointers)
//	nested struct     node 0x80|field key
//	slice / array     array node 0xC0|field key, elements with key 0 (struct elements as
//	field             nodes 0x80)
//	top-level []T     array node 0xC0|key; a top-level []struct is a PLAIN node 0x80|key
//	top-level [N]T    written like the slice []T (the reference panics on a bare array)
//	top-level omitted what a struct omits is omitted under the root too: an empty string,
//	                  an empty []byte, a nil pointer give the empty root 81 00 (Unmarshal
//	                  then reports ErrNotFound), as the Rust core and the Python binding do
//
// The key is refused when reserved (0x01..0x0f, reserved_tag) or too wide for the dialect
// (invalid_tag). Struct tags are hex ("0x11") or decimal ("17"); fields without a y3 tag,
// with y3:"-", or unexported are ignored.

// rootKey is the reference's RootToken: Marshal wraps every value in node 0x81.
const rootKey = 0x01

// ErrNotFound is returned by Unmarshal when the buffer holds no packet with the key.
var ErrNotFound = errors.New("y3: key not found")

// Marshal encodes v under key in the Golang dialect, wrapped in the root node 0x81.
func Marshal(key uint32, v any) ([]byte, error) { return DefaultConfig.AppendMarshal(nil, key, v) }

// Unmarshal decodes the value under key from buf (the output of Marshal, or the key's packet
// itself with the root stripped) into the value v points to, in the Golang dialect.
func Unmarshal(buf []byte, key uint32, v any) error { return DefaultConfig.Unmarshal(buf, key, v) }

// Marshal encodes v under key in c's dialect, wrapped in the root node 0x81.
func (c Config) Marshal(key uint32, v any) ([]byte, error) { return c.AppendMarshal(nil, key, v) }

func checkMarshalKey(key uint32, d Dialect) error {
	if key >= 0x01 && key <= 0x0f {
		return errReservedTag(key)
	}
	return PrimitiveTag(key).Check(d)
}

// AppendMarshal is Marshal appending to dst; dst is returned unchanged on error.
func (c Config) AppendMarshal(dst []byte, key uint32, v any) ([]byte, error) {
	d := c.Dialect
	if err := checkMarshalKey(key, d); err != nil {
		return dst, err
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		// An untyped nil says nothing about the value's type.
		return dst, &UnsupportedTypeError{Reason: "nil"}
	}
	// A nil pointer is left out, as it is from a struct (Rust: None; Python: None).
	omit := false
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			// Still refuse a type that could never be marshalled.
			if err := checkMarshalType(rv.Type()); err != nil {
				return dst, err
			}
			omit = true
			break
		}
		rv = rv.Elem()
	}
	if !omit {
		// The root is a node like any other: the reference skips zero-length primitives
		// added to a node, so an empty string or []byte is left out here too.
		omit = isEmptyBytes(rv)
	}
	out, m, err := BeginNode(dst, d, NodeTag(rootKey))
	if err != nil {
		return dst, err
	}
	if !omit {
		if out, err = marshalValue(out, d, key, rv, true); err != nil {
			return dst, err
		}
	}
	if out, err = m.End(out); err != nil {
		return dst, err
	}
	return out, nil
}

func marshalValue(dst []byte, d Dialect, id uint32, rv reflect.Value, top bool) ([]byte, error) {
	switch rv.Kind() {
	case reflect.Bool:
		return AppendBool(dst, d, id, rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return appendIntPacket(dst, d, id, rv.Int())
	case reflect.Uint32:
		return appendIntPacket(dst, d, id, int64(int32(uint32(rv.Uint()))))
	case reflect.Uint8, reflect.Uint16, reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return appendIntPacket(dst, d, id, int64(rv.Uint()))
	case reflect.Float32:
		return AppendFloat32(dst, d, id, float32(rv.Float()))
	case reflect.Float64:
		return AppendFloat64(dst, d, id, rv.Float())
	case reflect.String:
		return AppendString(dst, d, id, rv.String())
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			if rv.Kind() == reflect.Slice {
				return AppendBytes(dst, d, id, rv.Bytes())
			}
			b := make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
			return AppendBytes(dst, d, id, b)
		}
		tag := ArrayTag(id)
		if top && isStruct(rv.Type().Elem()) {
			// A top-level slice (or bare array) of structs is a plain node.
			tag = NodeTag(id)
		}
		dst, m, err := BeginNode(dst, d, tag)
		if err != nil {
			return dst, err
		}
		for i := 0; i < rv.Len(); i++ {
			e := rv.Index(i)
			for e.Kind() == reflect.Pointer || e.Kind() == reflect.Interface {
				if e.IsNil() {
					return dst, &UnsupportedTypeError{Type: rv.Type(), Reason: fmt.Sprintf("nil element %d", i)}
				}
				e = e.Elem()
			}
			if dst, err = marshalValue(dst, d, 0, e, false); err != nil {
				return dst, err
			}
		}
		return m.End(dst)
	case reflect.Struct:
		info, err := structFields(rv.Type())
		if err != nil {
			return dst, err
		}
		dst, m, err := BeginNode(dst, d, NodeTag(id))
		if err != nil {
			return dst, err
		}
		for _, f := range info.fields {
			fv := rv.Field(f.index)
			omit := false
			for fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Interface {
				if fv.IsNil() {
					omit = true
					break
				}
				fv = fv.Elem()
			}
			if omit || isEmptyBytes(fv) {
				continue
			}
			if dst, err = marshalValue(dst, d, f.key, fv, false); err != nil {
				return dst, err
			}
		}
		return m.End(dst)
	}
	return dst, &UnsupportedTypeError{Type: rv.Type()}
}

// isEmptyBytes: the reference skips zero-length primitives added to a node (struct fields,
// and the value under the root).
func isEmptyBytes(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Slice, reflect.Array:
		return v.Type().Elem().Kind() == reflect.Uint8 && v.Len() == 0
	}
	return false
}

// checkMarshalType reports the first type inside t that Marshal cannot write (maps,
// channels, functions, ...), without looking at a value.
func checkMarshalType(t reflect.Type) error {
	return checkMarshalTypeSeen(t, map[reflect.Type]bool{})
}

func checkMarshalTypeSeen(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String, reflect.Interface:
		return nil
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return checkMarshalTypeSeen(t.Elem(), seen)
	case reflect.Struct:
		info, err := structFields(t)
		if err != nil {
			return err
		}
		for _, f := range info.fields {
			if err := checkMarshalTypeSeen(t.Field(f.index).Type, seen); err != nil {
				return err
			}
		}
		return nil
	}
	return &UnsupportedTypeError{Type: t}
}

func isStruct(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

type fieldInfo struct {
	index int
	key   uint32
}

type structInfo struct {
	fields []fieldInfo
	byKey  map[uint32]int // key -> field index (the last field declaring it)
}

var structCache sync.Map // reflect.Type -> *structInfo

func structFields(t reflect.Type) (*structInfo, error) {
	if v, ok := structCache.Load(t); ok {
		return v.(*structInfo), nil
	}
	info := &structInfo{byKey: map[uint32]int{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("y3")
		if !ok || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		name = strings.TrimSpace(name)
		if name == "-" {
			continue
		}
		key, err := parseKey(name)
		if err != nil {
			return nil, &UnsupportedTypeError{Type: t, Reason: fmt.Sprintf("field %s: bad y3 key %q", f.Name, tag)}
		}
		info.fields = append(info.fields, fieldInfo{index: i, key: key})
		info.byKey[key] = i
	}
	v, _ := structCache.LoadOrStore(t, info)
	return v.(*structInfo), nil
}

// parseKey reads a struct tag key: "0x11" (hex) or "17" (decimal).
func parseKey(s string) (uint32, error) {
	if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") {
		v, err := strconv.ParseUint(s[2:], 16, 32)
		return uint32(v), err
	}
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err
}

// Unmarshal decodes the value under key from buf into the value v points to. buf is decoded
// and validated whole (Decode) first. It may be Marshal's output (root node 0x81 holding the
// key's packet) or the key's packet itself. Struct fields missing on the wire are left zero,
// unknown keys are ignored, empty slices and byte strings come back nil.
//
// Errors: any decode error (wrong_type when the wire shape does not fit the Go type,
// wrong_count for a fixed-size array of another length, varint_overflow for an integer the
// Go type cannot hold), ErrNotFound, *UnsupportedTypeError.
func (c Config) Unmarshal(buf []byte, key uint32, v any) error {
	if err := checkMarshalKey(key, c.Dialect); err != nil {
		return err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &UnsupportedTypeError{Type: reflect.TypeOf(v), Reason: "Unmarshal needs a non-nil pointer"}
	}
	p, err := c.Decode(buf)
	if err != nil {
		return err
	}
	if p.ID() == rootKey {
		q, ok, err := p.Child(key)
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		p = q
	} else if p.ID() != key {
		return ErrNotFound
	}
	return unmarshalValue(p, rv.Elem())
}

func unmarshalValue(p Packet, rv reflect.Value) error {
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			rv.Set(reflect.New(rv.Type().Elem()))
		}
		return unmarshalValue(p, rv.Elem())
	case reflect.Bool:
		x, err := p.Bool()
		if err == nil {
			rv.SetBool(x)
		}
		return err
	case reflect.Int32:
		x, err := p.Int32()
		if err == nil {
			rv.SetInt(int64(x))
		}
		return err
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int64:
		x, err := p.Int64()
		if err != nil {
			return err
		}
		if rv.OverflowInt(x) {
			return errVarintOverflow(len(p.value), uint32(rv.Type().Bits()))
		}
		rv.SetInt(x)
		return nil
	case reflect.Uint32:
		x, err := p.Uint32()
		if err == nil {
			rv.SetUint(uint64(x))
		}
		return err
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		x, err := p.Uint64()
		if err == nil {
			rv.SetUint(x)
		}
		return err
	case reflect.Uint8, reflect.Uint16:
		x, err := p.Int64()
		if err != nil {
			return err
		}
		if x < 0 || rv.OverflowUint(uint64(x)) {
			return errVarintOverflow(len(p.value), uint32(rv.Type().Bits()))
		}
		rv.SetUint(uint64(x))
		return nil
	case reflect.Float32:
		x, err := p.Float32()
		if err == nil {
			rv.SetFloat(float64(x))
		}
		return err
	case reflect.Float64:
		x, err := p.Float64()
		if err == nil {
			rv.SetFloat(x)
		}
		return err
	case reflect.String:
		x, err := p.String()
		if err == nil {
			rv.SetString(x)
		}
		return err
	case reflect.Slice:
		rv.Set(reflect.Zero(rv.Type()))
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b, err := p.Bytes()
			if err == nil && b != nil {
				s := reflect.MakeSlice(rv.Type(), len(b), len(b))
				reflect.Copy(s, reflect.ValueOf(b))
				rv.Set(s)
			}
			return err
		}
		it, err := p.ChildIter()
		if err != nil {
			return err
		}
		for it.Next() {
			rv.Set(reflect.Append(rv, reflect.Zero(rv.Type().Elem())))
			if err := unmarshalValue(it.Packet(), rv.Index(rv.Len()-1)); err != nil {
				return err
			}
		}
		return it.Err()
	case reflect.Array:
		rv.Set(reflect.Zero(rv.Type()))
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			b, err := p.BytesValue()
			if err != nil {
				return err
			}
			if len(b) != rv.Len() {
				return errWrongCount(rv.Len(), len(b))
			}
			reflect.Copy(rv, reflect.ValueOf(b))
			return nil
		}
		it, err := p.ChildIter()
		if err != nil {
			return err
		}
		n := 0
		for it.Next() {
			if n < rv.Len() {
				if err := unmarshalValue(it.Packet(), rv.Index(n)); err != nil {
					return err
				}
			}
			n++
		}
		if err := it.Err(); err != nil {
			return err
		}
		if n != rv.Len() {
			return errWrongCount(rv.Len(), n)
		}
		return nil
	case reflect.Struct:
		info, err := structFields(rv.Type())
		if err != nil {
			return err
		}
		rv.Set(reflect.Zero(rv.Type()))
		it, err := p.ChildIter()
		if err != nil {
			return err
		}
		for it.Next() {
			c := it.Packet()
			if i, ok := info.byKey[c.ID()]; ok {
				if err := unmarshalValue(c, rv.Field(i)); err != nil {
					return err
				}
			}
		}
		return it.Err()
	case reflect.Interface:
		if !rv.IsNil() && rv.Elem().Kind() == reflect.Pointer {
			return unmarshalValue(p, rv.Elem())
		}
	}
	return &UnsupportedTypeError{Type: rv.Type()}
}
