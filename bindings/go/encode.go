package y3

// The encoder: append-style writers for single packets, a node builder that fixes the
// length up when the node closes, and an owned Item tree whose EncodedLen is exact.
//
//	Item{0x10, Node{{0x11, Int32(1)}, {0x12, String("a")}}}
//
//	  90 06 | 11 01 01 | 12 01 61
//	  ^  ^    ^          ^
//	  |  |    child 0x11 child 0x12
//	  |  value length 6 = sum of the children's EncodedLen
//	  node flag | 0x10
//
// Every writer checks the tag against the dialect (invalid_tag: ids above 0x3f in Golang and
// NVarInt, above 2^28-1 in Draft02) and the length against int32 (too_long) first; on error
// dst is returned unchanged.

// AppendHeader appends the header of a packet with tag t and an n-byte value; the caller
// appends the n value bytes next.
func AppendHeader(dst []byte, d Dialect, t Tag, n int) ([]byte, error) {
	return appendHeader(dst, d, t, n)
}

// AppendBytes appends a primitive packet whose value is b (raw bytes, or a value encoded
// elsewhere).
func AppendBytes(dst []byte, d Dialect, id uint32, b []byte) ([]byte, error) {
	dst, err := appendHeader(dst, d, PrimitiveTag(id), len(b))
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// AppendString appends a primitive string packet (the bytes of s; UTF-8 is the caller's
// business).
func AppendString(dst []byte, d Dialect, id uint32, s string) ([]byte, error) {
	dst, err := appendHeader(dst, d, PrimitiveTag(id), len(s))
	if err != nil {
		return dst, err
	}
	return append(dst, s...), nil
}

func appendIntPacket(dst []byte, d Dialect, id uint32, v int64) ([]byte, error) {
	t := PrimitiveTag(id)
	if err := t.Check(d); err != nil {
		return dst, err
	}
	dst = appendHeaderUnchecked(dst, d, t, intLen(d, v))
	return appendInt(dst, d, v), nil
}

// AppendInt32 appends a primitive int32 packet.
func AppendInt32(dst []byte, d Dialect, id uint32, v int32) ([]byte, error) {
	return appendIntPacket(dst, d, id, int64(v))
}

// AppendInt64 appends a primitive int64 packet.
func AppendInt64(dst []byte, d Dialect, id uint32, v int64) ([]byte, error) {
	return appendIntPacket(dst, d, id, v)
}

// AppendUint32 appends a primitive uint32 packet, written as the int32 with the same bits.
func AppendUint32(dst []byte, d Dialect, id uint32, v uint32) ([]byte, error) {
	return appendIntPacket(dst, d, id, int64(int32(v)))
}

// AppendUint64 appends a primitive uint64 packet, written as the int64 with the same bits.
func AppendUint64(dst []byte, d Dialect, id uint32, v uint64) ([]byte, error) {
	return appendIntPacket(dst, d, id, int64(v))
}

// AppendBool appends a primitive bool packet (the integer 0 or 1).
func AppendBool(dst []byte, d Dialect, id uint32, v bool) ([]byte, error) {
	var i int64
	if v {
		i = 1
	}
	return appendIntPacket(dst, d, id, i)
}

// AppendFloat32 appends a primitive float32 packet (VarFloat).
func AppendFloat32(dst []byte, d Dialect, id uint32, v float32) ([]byte, error) {
	t := PrimitiveTag(id)
	if err := t.Check(d); err != nil {
		return dst, err
	}
	dst = appendHeaderUnchecked(dst, d, t, float32Len(v))
	return appendFloat32Value(dst, v), nil
}

// AppendFloat64 appends a primitive float64 packet (VarFloat).
func AppendFloat64(dst []byte, d Dialect, id uint32, v float64) ([]byte, error) {
	t := PrimitiveTag(id)
	if err := t.Check(d); err != nil {
		return dst, err
	}
	dst = appendHeaderUnchecked(dst, d, t, float64Len(v))
	return appendFloat64Value(dst, v), nil
}

// NodeMark remembers where an open node started; see BeginNode.
type NodeMark struct {
	start int // offset of the tag in dst
	value int // offset of the first value byte in dst
	d     Dialect
	t     Tag
}

// BeginNode appends the header of a node (or array) tag t with a one-byte length
// placeholder; append the children and close it with NodeMark.End, which writes the exact
// length (moving the children when it needs more than one byte). Nodes may nest.
//
//	dst, m, _ := y3.BeginNode(dst, y3.Golang, y3.NodeTag(0x10))
//	dst, _ = y3.AppendInt32(dst, y3.Golang, 0x11, 1)
//	dst, _ = m.End(dst)
func BeginNode(dst []byte, d Dialect, t Tag) ([]byte, NodeMark, error) {
	if err := t.Check(d); err != nil {
		return dst, NodeMark{}, err
	}
	start := len(dst)
	dst = appendHeaderUnchecked(dst, d, t, 0)
	return dst, NodeMark{start: start, value: len(dst), d: d, t: t}, nil
}

// End closes the node opened by BeginNode: everything appended to dst since is its value.
// Errors: too_long when the value exceeds a signed 32-bit length.
func (m NodeMark) End(dst []byte) ([]byte, error) {
	n := len(dst) - m.value
	if n > maxLen32 {
		return dst, errEncodeTooLong(n)
	}
	lenAt := m.value - 1 // the placeholder length byte
	if extra := lengthLen(n) - 1; extra > 0 {
		dst = append(dst, make([]byte, extra)...)
		copy(dst[m.value+extra:], dst[m.value:m.value+n])
	}
	appendLength(dst[lenAt:lenAt], n)
	return dst, nil
}

// Value is a value in an owned packet tree: one of Int32, Int64, Uint32, Uint64, Float32,
// Float64, Bool, String, Bytes, Node and Array.
type Value interface {
	// tag is the tag an item with this value and key id is written with.
	tag(id uint32) Tag
	valueLen(d Dialect) int
	appendValue(dst []byte, d Dialect) []byte
}

type (
	// Int32 is an int32 value.
	Int32 int32
	// Int64 is an int64 value.
	Int64 int64
	// Uint32 is a uint32 value, written as the int32 with the same bits.
	Uint32 uint32
	// Uint64 is a uint64 value, written as the int64 with the same bits.
	Uint64 uint64
	// Float32 is a float32 value (VarFloat).
	Float32 float32
	// Float64 is a float64 value (VarFloat).
	Float64 float64
	// Bool is a bool value (the integer 0 or 1).
	Bool bool
	// String is a UTF-8 string value.
	String string
	// Bytes is a raw bytes value.
	Bytes []byte
	// Node is a node value: child packets.
	Node []Item
	// Array is an array node value: child packets, by convention with key 0.
	Array []Item
)

func (Int32) tag(id uint32) Tag   { return PrimitiveTag(id) }
func (Int64) tag(id uint32) Tag   { return PrimitiveTag(id) }
func (Uint32) tag(id uint32) Tag  { return PrimitiveTag(id) }
func (Uint64) tag(id uint32) Tag  { return PrimitiveTag(id) }
func (Float32) tag(id uint32) Tag { return PrimitiveTag(id) }
func (Float64) tag(id uint32) Tag { return PrimitiveTag(id) }
func (Bool) tag(id uint32) Tag    { return PrimitiveTag(id) }
func (String) tag(id uint32) Tag  { return PrimitiveTag(id) }
func (Bytes) tag(id uint32) Tag   { return PrimitiveTag(id) }
func (Node) tag(id uint32) Tag    { return NodeTag(id) }
func (Array) tag(id uint32) Tag   { return ArrayTag(id) }

func (v Int32) valueLen(d Dialect) int  { return intLen(d, int64(v)) }
func (v Int64) valueLen(d Dialect) int  { return intLen(d, int64(v)) }
func (v Uint32) valueLen(d Dialect) int { return intLen(d, int64(int32(v))) }
func (v Uint64) valueLen(d Dialect) int { return intLen(d, int64(v)) }
func (v Float32) valueLen(Dialect) int  { return float32Len(float32(v)) }
func (v Float64) valueLen(Dialect) int  { return float64Len(float64(v)) }
func (v Bool) valueLen(d Dialect) int   { return 1 }
func (v String) valueLen(Dialect) int   { return len(v) }
func (v Bytes) valueLen(Dialect) int    { return len(v) }
func (v Node) valueLen(d Dialect) int   { return itemsLen(v, d) }
func (v Array) valueLen(d Dialect) int  { return itemsLen(v, d) }
func itemsLen(items []Item, d Dialect) int {
	n := 0
	for i := range items {
		n += items[i].EncodedLen(d)
	}
	return n
}

func (v Int32) appendValue(dst []byte, d Dialect) []byte { return appendInt(dst, d, int64(v)) }
func (v Int64) appendValue(dst []byte, d Dialect) []byte { return appendInt(dst, d, int64(v)) }
func (v Uint32) appendValue(dst []byte, d Dialect) []byte {
	return appendInt(dst, d, int64(int32(v)))
}
func (v Uint64) appendValue(dst []byte, d Dialect) []byte { return appendInt(dst, d, int64(v)) }
func (v Float32) appendValue(dst []byte, _ Dialect) []byte {
	return appendFloat32Value(dst, float32(v))
}
func (v Float64) appendValue(dst []byte, _ Dialect) []byte {
	return appendFloat64Value(dst, float64(v))
}
func (v Bool) appendValue(dst []byte, _ Dialect) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}
func (v String) appendValue(dst []byte, _ Dialect) []byte { return append(dst, v...) }
func (v Bytes) appendValue(dst []byte, _ Dialect) []byte  { return append(dst, v...) }
func (v Node) appendValue(dst []byte, d Dialect) []byte   { return appendItems(dst, v, d) }
func (v Array) appendValue(dst []byte, d Dialect) []byte  { return appendItems(dst, v, d) }
func appendItems(dst []byte, items []Item, d Dialect) []byte {
	for i := range items {
		dst = items[i].appendUnchecked(dst, d)
	}
	return dst
}

// Item is a packet in an owned tree: a key and a value.
type Item struct {
	ID    uint32
	Value Value
}

// NewNode is a node item with the given children.
func NewNode(id uint32, children ...Item) Item { return Item{ID: id, Value: Node(children)} }

// NewArray is an array item with the given elements (by convention with key 0).
func NewArray(id uint32, elements ...Item) Item { return Item{ID: id, Value: Array(elements)} }

// Tag is the tag the item is written with.
func (it Item) Tag() Tag {
	if it.Value == nil {
		return PrimitiveTag(it.ID)
	}
	return it.Value.tag(it.ID)
}

// ValueLen is the number of bytes of the value alone in dialect d.
func (it Item) ValueLen(d Dialect) int {
	if it.Value == nil {
		return 0
	}
	return it.Value.valueLen(d)
}

// EncodedLen is the number of bytes of the whole packet, header included: exactly what
// AppendTo writes.
func (it Item) EncodedLen(d Dialect) int {
	n := it.ValueLen(d)
	return headerLen(it.Tag(), n, d) + n
}

// Check checks every tag and length in the tree against dialect d (invalid_tag, too_long;
// an *UnsupportedTypeError for an item without a value).
func (it Item) Check(d Dialect) error {
	if it.Value == nil {
		return &UnsupportedTypeError{Reason: "item without a value"}
	}
	if err := it.Tag().Check(d); err != nil {
		return err
	}
	if n := it.Value.valueLen(d); n > maxLen32 {
		return errEncodeTooLong(n)
	}
	var children []Item
	switch v := it.Value.(type) {
	case Node:
		children = v
	case Array:
		children = v
	}
	for i := range children {
		if err := children[i].Check(d); err != nil {
			return err
		}
	}
	return nil
}

// AppendTo appends the packet to dst in one pass (each node's length is fixed up when it
// closes, as with BeginNode). On error dst is returned as it was.
func (it Item) AppendTo(dst []byte, d Dialect) ([]byte, error) {
	out, err := it.appendTo(dst, d)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func (it Item) appendTo(dst []byte, d Dialect) ([]byte, error) {
	var children []Item
	switch v := it.Value.(type) {
	case Int32:
		return appendIntPacket(dst, d, it.ID, int64(v))
	case Int64:
		return appendIntPacket(dst, d, it.ID, int64(v))
	case Uint32:
		return appendIntPacket(dst, d, it.ID, int64(int32(v)))
	case Uint64:
		return appendIntPacket(dst, d, it.ID, int64(v))
	case Bool:
		return AppendBool(dst, d, it.ID, bool(v))
	case Float32:
		return AppendFloat32(dst, d, it.ID, float32(v))
	case Float64:
		return AppendFloat64(dst, d, it.ID, float64(v))
	case String:
		return AppendString(dst, d, it.ID, string(v))
	case Bytes:
		return AppendBytes(dst, d, it.ID, v)
	case Node:
		children = v
	case Array:
		children = v
	default:
		return dst, &UnsupportedTypeError{Reason: "item without a value"}
	}
	dst, m, err := BeginNode(dst, d, it.Tag())
	if err != nil {
		return dst, err
	}
	for i := range children {
		if dst, err = children[i].appendTo(dst, d); err != nil {
			return dst, err
		}
	}
	return m.End(dst)
}

// Encode returns the packet in a new slice of exactly EncodedLen bytes.
func (it Item) Encode(d Dialect) ([]byte, error) {
	if err := it.Check(d); err != nil {
		return nil, err
	}
	return it.appendUnchecked(make([]byte, 0, it.EncodedLen(d)), d), nil
}

// EncodeTo writes the packet into the front of buf, returning the bytes written.
// Errors: as Check, and buffer_too_small when buf is shorter than EncodedLen.
func (it Item) EncodeTo(buf []byte, d Dialect) (int, error) {
	if err := it.Check(d); err != nil {
		return 0, err
	}
	need := it.EncodedLen(d)
	if need > len(buf) {
		return 0, &Error{Kind: KindBufferTooSmall, Op: OpEncode, Required: uint64(need), Remaining: uint64(len(buf))}
	}
	return len(it.appendUnchecked(buf[:0], d)), nil
}

func (it Item) appendUnchecked(dst []byte, d Dialect) []byte {
	dst = appendHeaderUnchecked(dst, d, it.Tag(), it.Value.valueLen(d))
	return it.Value.appendValue(dst, d)
}

// ReadItem reads p with the shape and scalar types of schema (the types are not on the
// wire). Node children are matched by position and their keys taken from the wire.
// Errors: those of the typed accessors; wrong_count when a node has another number of
// children than the schema.
func ReadItem(p Packet, schema Value) (Item, error) {
	var v Value
	var err error
	switch s := schema.(type) {
	case Int32:
		var x int32
		x, err = p.Int32()
		v = Int32(x)
	case Int64:
		var x int64
		x, err = p.Int64()
		v = Int64(x)
	case Uint32:
		var x uint32
		x, err = p.Uint32()
		v = Uint32(x)
	case Uint64:
		var x uint64
		x, err = p.Uint64()
		v = Uint64(x)
	case Float32:
		var x float32
		x, err = p.Float32()
		v = Float32(x)
	case Float64:
		var x float64
		x, err = p.Float64()
		v = Float64(x)
	case Bool:
		var x bool
		x, err = p.Bool()
		v = Bool(x)
	case String:
		var x string
		x, err = p.String()
		v = String(x)
	case Bytes:
		var x []byte
		x, err = p.Bytes()
		v = Bytes(x)
	case Node:
		var items []Item
		items, err = readItems(p, s)
		v = Node(items)
	case Array:
		var items []Item
		items, err = readItems(p, s)
		v = Array(items)
	default:
		return Item{}, &UnsupportedTypeError{Reason: "nil schema"}
	}
	if err != nil {
		return Item{}, err
	}
	return Item{ID: p.ID(), Value: v}, nil
}

func readItems(p Packet, schema []Item) ([]Item, error) {
	it, err := p.ChildIter()
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(schema))
	for it.Next() {
		if len(out) == len(schema) {
			extra := 1
			for it.Next() {
				extra++
			}
			if it.Err() != nil {
				return nil, it.Err()
			}
			return nil, errWrongCount(len(schema), len(schema)+extra)
		}
		item, err := ReadItem(it.Packet(), schema[len(out)].Value)
		if err != nil {
			return nil, err
		}
		out = append(out, item)
	}
	if it.Err() != nil {
		return nil, it.Err()
	}
	if len(out) != len(schema) {
		return nil, errWrongCount(len(schema), len(out))
	}
	return out, nil
}
