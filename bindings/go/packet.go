package y3

import (
	"fmt"
	"iter"
	"math"
)

// Packet is a zero-copy view of one packet in a buffer: its tag, its value bytes and typed
// accessors. It borrows the buffer it was read from; nothing is copied until String or
// Bytes is called.
//
//	+-----+--------+---------------------------+
//	| tag | length | value (length bytes)      |   primitive: the scalar's bytes
//	+-----+--------+---------------------------+   node: child packets, back to back
//
// Children are parsed as they are iterated, each header through the same parser the
// streaming Observer uses, and every length is checked against the enclosing node and the
// limits before it is used to slice.
type Packet struct {
	value []byte
	tag   Tag
	meta  uint64 // depth (bits 0..31), header length (32..39), dialect (40..47)
	lim   Limits
	// Seven machine words: a Packet travels in registers, not through memory.
}

func packMeta(depth uint32, headLen int, d Dialect) uint64 {
	return uint64(depth) | uint64(headLen)<<32 | uint64(d)<<40
}

func newPacket(value []byte, t Tag, depth uint32, headLen int, c *Config) Packet {
	return Packet{value: value, tag: t, meta: packMeta(depth, headLen, c.Dialect), lim: c.Limits}
}

func (p Packet) dep() uint32      { return uint32(p.meta) }
func (p Packet) hl() int          { return int(uint8(p.meta >> 32)) }
func (p Packet) dialect() Dialect { return Dialect(p.meta >> 40) }
func (p Packet) cfg() Config      { return Config{Dialect: p.dialect(), Limits: p.lim} }

// Parse reads the first packet of buf in the Golang dialect and returns it with the bytes
// after it. Only the header is read; Decode checks the whole tree.
func Parse(buf []byte) (p Packet, rest []byte, err error) { return DefaultConfig.Parse(buf) }

// Parse reads the first packet of buf and returns it with the bytes after it (trailing bytes
// are fine here). Errors: unexpected_end when buf ends inside the packet, and header errors.
func (c Config) Parse(buf []byte) (p Packet, rest []byte, err error) {
	c = c.norm()
	h, ok, err := parseHeader(buf, &c)
	if err != nil {
		return Packet{}, nil, err
	}
	if !ok {
		return Packet{}, nil, errUnexpectedEnd(1)
	}
	after := buf[h.headLen:]
	n := int(h.len) // at most MaxInt32
	if len(after) < n {
		return Packet{}, nil, errUnexpectedEnd(uint64(n - len(after)))
	}
	p = newPacket(after[:n:n], h.tag, 1, h.headLen, &c)
	return p, after[n:], nil
}

// Decode reads exactly one packet from buf (Golang dialect) and validates every header
// below it.
func Decode(buf []byte) (Packet, error) { return DefaultConfig.Decode(buf) }

// Decode reads exactly one packet from buf and validates every header below it (lengths
// within their nodes, depth within the limit) by walking its children once with a
// validating Observer, the same state machine that serves streaming input (the packet's own
// header is read once, by Parse).
//
// Errors: unexpected_end when buf is short, trailing_bytes when bytes follow the packet, and
// any header error met in the tree.
func (c Config) Decode(buf []byte) (Packet, error) {
	p, rest, err := c.Parse(buf)
	if err != nil {
		return Packet{}, err
	}
	if len(rest) != 0 {
		return Packet{}, errTrailingBytes(len(rest))
	}
	if err := validateValue(c, p.tag, p.value); err != nil {
		return Packet{}, err
	}
	return p, nil
}

// validateValue validates the value of one top-level packet whose header was read already
// (tag t): a node's children are walked once, from the state a validator reaches on reading
// that header (the node entered, its depth checked), so that Decode reads each header once.
// A primitive, and every Draft02 value (its wire marks no nodes), has nothing below its
// header to check.
func validateValue(c Config, t Tag, value []byte) error {
	c = c.norm()
	if !t.IsNode() || !c.Dialect.HasNodeFlag() {
		return nil
	}
	// The children under one level less, by the one walker; anything it leaves (an error
	// included) is the machine's, from the start.
	if c.Limits.MaxDepth > 1 && walkValidate(&c, value, int(c.Limits.MaxDepth)-1) {
		return nil
	}
	return validateValueGeneral(c, t, value)
}

// validateValueGeneral is validateValue by the observer alone (c normalized, t a node of a
// one-byte-tag dialect): what the walker leaves, and the reference the tests compare it
// against.
func validateValueGeneral(c Config, t Tag, value []byte) error {
	var o Observer
	o.init(c, nil, true)
	o.started = 1
	if err := o.enter(uint64(len(value)), 0); err != nil {
		return err
	}
	if len(value) == 0 {
		return nil
	}
	if _, _, err := o.feed(value); err != nil {
		return err
	}
	return o.Finish()
}

// Validate checks a stream of complete top-level packets: every header, every node length,
// the depth limit. unexpected_end if buf stops inside a packet.
func (c Config) Validate(buf []byte) error {
	// The one walker first: it answers a buffer of whole, valid packets; anything else (an
	// error included) is the machine's to report, from the start.
	if n := c.norm(); walkValidate(&n, buf, math.MaxInt) {
		return nil
	}
	return c.validateGeneral(buf)
}

// validateGeneral is Validate by the observer alone: the reference the tests compare the
// walker against.
func (c Config) validateGeneral(buf []byte) error {
	var o Observer
	o.init(c, nil, true)
	if _, _, err := o.feed(buf); err != nil {
		return err
	}
	return o.Finish()
}

// Get returns the first value at key path in buf (Golang dialect), borrowed from buf.
// See Config.Get.
func Get(buf []byte, path ...uint32) (Packet, bool, error) { return DefaultConfig.Get(buf, path...) }

// Get returns the first value at key path in buf, borrowed from buf.
//
// path[0] is the key of a top-level packet, path[1] a child of it, and so on. buf may hold
// several top-level packets; the first match wins. Everything before the match is walked
// header by header and skipped; nothing after it is read. ok is false when there is no
// match (or path is empty).
//
// Errors: header errors met on the way; unexpected_end when buf ends inside a packet before
// a match; too_deep for a path longer than MaxPathDepth. It allocates nothing.
func (c Config) Get(buf []byte, path ...uint32) (p Packet, ok bool, err error) {
	if len(path) == 0 {
		return Packet{}, false, nil
	}
	if len(path) > MaxPathDepth {
		return Packet{}, false, errTooDeep(MaxPathDepth)
	}
	c = c.norm()
	if c.Dialect != Draft02 {
		var ends [MaxPathDepth]int
		switch got, start, n, hl, depth, tag, _ := fastWalk(path, &c, buf, &ends); got {
		case fastFound:
			v := buf[start : start+n : start+n]
			return Packet{value: v, tag: byteTag(tag), meta: packMeta(uint32(depth), hl, c.Dialect), lim: c.Limits}, true, nil
		case fastDone:
			return Packet{}, false, nil
		}
	}
	return c.getGeneral(buf, path)
}

// getGeneral is Get by the general machine alone: what the fast path leaves to it, and the
// reference the tests compare the fast path against. c is normalized.
func (c Config) getGeneral(buf []byte, path []uint32) (p Packet, ok bool, err error) {
	var o Observer
	o.one.n = copy(o.one.ids[:], path)
	o.cfg = c
	o.all = 1
	o.cur = level{end: topEnd, active: 1}
	if path[0] < 64 {
		o.cur.want = 1 << path[0]
	}
	_, found, err := o.feed(buf)
	if err != nil {
		return Packet{}, false, err
	}
	if found {
		// Field by field: the fields were just stored one by one, and a wide copy of the
		// struct would stall on store forwarding.
		return Packet{value: o.out.value, tag: o.out.tag, meta: o.out.meta, lim: o.out.lim}, true, nil
	}
	return Packet{}, false, o.Finish()
}

// Tag is the packet's tag.
func (p Packet) Tag() Tag { return p.tag }

// ID is the packet's key (seq id).
func (p Packet) ID() uint32 { return p.tag.ID() }

// IsNode reports whether the tag marks a node. Always false in Draft02, where the wire does
// not say.
func (p Packet) IsNode() bool { return p.tag.IsNode() }

// IsArray reports whether the tag marks an array node.
func (p Packet) IsArray() bool { return p.tag.IsArray() }

// Value is the raw value bytes (for a node, its children back to back), borrowed.
func (p Packet) Value() []byte { return p.value }

// EncodedLen is the number of bytes the whole packet occupies, header included.
func (p Packet) EncodedLen() int { return p.hl() + len(p.value) }

// Depth is the nesting depth: 1 for a packet parsed from a buffer, 2 for its children...
func (p Packet) Depth() int { return int(p.dep()) }

// Config is the dialect and limits this view reads with.
func (p Packet) Config() Config { return p.cfg() }

// IsZero reports whether p is the zero Packet (returned with errors and misses).
func (p Packet) IsZero() bool { return p.dep() == 0 }

// ChildIter returns a cursor over the children, in the style of bufio.Scanner:
//
//	it, err := p.ChildIter()
//	for it.Next() { use(it.Packet()) }
//	if err := it.Err(); err != nil { ... }
//
// Errors: wrong_type when the tag marks a primitive (never in Draft02, where any value may
// be read as children), too_deep past the depth limit.
func (p Packet) ChildIter() (ChildIter, error) {
	if p.dialect().HasNodeFlag() && !p.tag.IsNode() {
		return ChildIter{}, errWrongType("node", p.tag.ID())
	}
	if p.dep() >= p.lim.MaxDepth {
		return ChildIter{}, errTooDeep(p.lim.MaxDepth)
	}
	return ChildIter{rest: p.value, depth: p.dep() + 1, cfg: p.cfg()}, nil
}

// Children iterates the child packets. A malformed child (or a primitive p) is yielded once
// as an error, and the iteration stops.
//
//	for c, err := range p.Children() { ... }
func (p Packet) Children() iter.Seq2[Packet, error] {
	return func(yield func(Packet, error) bool) {
		it, err := p.ChildIter()
		if err != nil {
			yield(Packet{}, err)
			return
		}
		for it.Next() {
			if !yield(it.cur, nil) {
				return
			}
		}
		if it.err != nil {
			yield(Packet{}, it.err)
		}
	}
}

// Child returns the first child with key id.
func (p Packet) Child(id uint32) (Packet, bool, error) {
	it, err := p.ChildIter()
	if err != nil {
		return Packet{}, false, err
	}
	for it.Next() {
		if it.cur.tag.ID() == id {
			return it.cur, true, nil
		}
	}
	return Packet{}, false, it.err
}

// Find follows a key path below p ({0x11, 0x21}: child 0x11, then its child 0x21).
func (p Packet) Find(path ...uint32) (Packet, bool, error) {
	at := p
	for _, id := range path {
		next, ok, err := at.Child(id)
		if err != nil || !ok {
			return Packet{}, false, err
		}
		at = next
	}
	return at, true, nil
}

// ChildIter is a cursor over a node's children, parsed lazily. It stops at the first error.
type ChildIter struct {
	rest  []byte
	cur   Packet
	err   error
	depth uint32
	cfg   Config
}

// Next advances to the next child, reporting false at the end or on an error.
func (it *ChildIter) Next() bool {
	if len(it.rest) == 0 {
		return false
	}
	available := uint64(len(it.rest))
	h, ok, err := parseHeader(it.rest, &it.cfg)
	if err == nil && !ok {
		err = errTruncatedHeader(available)
	}
	if err == nil {
		after := it.rest[h.headLen:]
		if uint64(len(after)) < h.len {
			err = errChildOverflow(h.len, uint64(len(after)))
		} else {
			n := int(h.len)
			it.cur = newPacket(after[:n:n], h.tag, it.depth, h.headLen, &it.cfg)
			it.rest = after[n:]
			return true
		}
	}
	it.err = err
	it.rest = nil
	it.cur = Packet{}
	return false
}

// Packet is the current child (valid after Next returned true).
func (it *ChildIter) Packet() Packet { return it.cur }

// Err is the error that stopped the iteration, if any.
func (it *ChildIter) Err() error { return it.err }

func (p Packet) primitive() ([]byte, error) {
	if p.tag.IsNode() {
		return nil, errWrongType("primitive", p.tag.ID())
	}
	return p.value, nil
}

// Int32 reads the value as int32.
func (p Packet) Int32() (int32, error) {
	v, err := p.primitive()
	if err != nil {
		return 0, err
	}
	return decodeInt32(p.dialect(), v)
}

// Int64 reads the value as int64.
func (p Packet) Int64() (int64, error) {
	v, err := p.primitive()
	if err != nil {
		return 0, err
	}
	return decodeInt64(p.dialect(), v)
}

// Uint32 reads the value as uint32 (written as the int32 with the same bits).
func (p Packet) Uint32() (uint32, error) {
	v, err := p.primitive()
	if err != nil {
		return 0, err
	}
	return decodeUint32(p.dialect(), v)
}

// Uint64 reads the value as uint64 (written as the int64 with the same bits).
func (p Packet) Uint64() (uint64, error) {
	v, err := p.primitive()
	if err != nil {
		return 0, err
	}
	return decodeUint64(p.dialect(), v)
}

// Float32 reads the value as a 1..4-byte VarFloat.
func (p Packet) Float32() (float32, error) {
	v, err := p.primitive()
	if err != nil {
		return 0, err
	}
	return decodeFloat32(v)
}

// Float64 reads the value as a 1..8-byte VarFloat.
func (p Packet) Float64() (float64, error) {
	v, err := p.primitive()
	if err != nil {
		return 0, err
	}
	return decodeFloat64(v)
}

// Bool reads the value as the integer 0 or 1 (invalid_bool otherwise).
func (p Packet) Bool() (bool, error) {
	v, err := p.primitive()
	if err != nil {
		return false, err
	}
	return decodeBool(p.dialect(), v)
}

// String reads the value as a UTF-8 string (a copy). See StringBytes for a borrowed view.
func (p Packet) String() (string, error) {
	v, err := p.StringBytes()
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// StringBytes checks that the value is UTF-8 and returns it borrowed, without copying.
func (p Packet) StringBytes() ([]byte, error) {
	v, err := p.primitive()
	if err != nil {
		return nil, err
	}
	if err := checkUTF8(v); err != nil {
		return nil, err
	}
	return v, nil
}

// Bytes returns a copy of the value bytes (nil for an empty value).
func (p Packet) Bytes() ([]byte, error) {
	v, err := p.primitive()
	if err != nil || len(v) == 0 {
		return nil, err
	}
	return append([]byte(nil), v...), nil
}

// BytesValue returns the value bytes borrowed from the buffer, without copying.
func (p Packet) BytesValue() ([]byte, error) { return p.primitive() }

// GoString renders the packet for debugging (%#v).
func (p Packet) GoString() string {
	return fmt.Sprintf("y3.Packet{%v, len %d, depth %d}", p.tag, len(p.value), p.dep())
}
