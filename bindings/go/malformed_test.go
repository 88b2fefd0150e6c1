package y3

import (
	"math"
	"testing"
)

// acc is the outcome of one accessor: a value or an error kind.
type acc struct {
	kind Kind    // "" when ok
	val  float64 // the value when ok (integers and floats; bools as 0/1)
}

func ok(v float64) acc { return acc{val: v} }
func bad(k Kind) acc   { return acc{kind: k} }

// expectation is what we do with one malformed-behaviour.json input, per decisions.md.
type expectation struct {
	decode Kind // Decode's error ("" = ok)
	// The scalar accessors after a successful Decode, per dialect (nil: not a primitive).
	int32, boolean, float32, float64 map[Dialect]acc
	// children of a successfully decoded node
	children int
	fields   map[string]uint64 // numeric context of the decode error
}

func both(a acc) map[Dialect]acc { return map[Dialect]acc{Golang: a, NVarInt: a} }
func per(g, n acc) map[Dialect]acc {
	return map[Dialect]acc{Golang: g, NVarInt: n}
}

// malformedExpect covers every input name of malformed-behaviour.json; an entry whose name is
// missing here fails the test.
var malformedExpect = map[string]expectation{
	"empty":    {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 1}},
	"tag_only": {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 1}},
	// The reference reads an empty value as 0 / false; an empty scalar is invalid_length.
	"length_0": {
		int32: both(bad(KindInvalidLength)), boolean: both(bad(KindInvalidLength)),
		float32: both(bad(KindInvalidLength)), float64: both(bad(KindInvalidLength)),
	},
	"value_truncated (len 2, 1 byte)": {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 1}},
	"length_varint_unterminated":      {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 1}},
	"length_negative_-1 (0x7f)":       {decode: KindNegativeLength, fields: map[string]uint64{"declared": uint64(1<<64 - 1)}},
	"length_negative_-64 (0x40)":      {decode: KindNegativeLength, fields: map[string]uint64{"declared": uint64(1<<64 - 64)}},
	// Non-minimal lengths that fit are accepted.
	"length_non_minimal (1 as 80 01)": {
		int32: both(ok(5)), boolean: both(bad(KindInvalidBool)),
		float32: both(ok(float64(math.Float32frombits(0x05000000)))),
		float64: both(ok(math.Float64frombits(0x0500000000000000))),
	},
	// Parse accepts trailing bytes, Decode (exactly one packet) does not.
	"trailing_bytes_after_packet": {decode: KindTrailingBytes, fields: map[string]uint64{"count": 2}},
	// PVarInt accepts redundant sign groups; in nvarint 80 05 is simply -32763.
	"value_non_minimal_pvarint (5 as 80 05)": {
		int32: per(ok(5), ok(-32763)), boolean: per(bad(KindInvalidBool), bad(KindInvalidBool)),
		float32: both(ok(float64(math.Float32frombits(0x80050000)))),
		float64: both(ok(math.Float64frombits(0x8005000000000000))),
	},
	// Too wide for int32 in both dialects (the references truncate silently).
	"value_pvarint_overlong_6_bytes": {
		int32: both(bad(KindVarintOverflow)), boolean: both(bad(KindInvalidBool)),
		float32: both(bad(KindInvalidLength)),
		float64: both(ok(math.Float64frombits(0x8181818181010000))),
	},
	// A PVarInt whose last byte continues; in nvarint 0x80 is -128.
	"value_pvarint_unterminated": {
		int32: per(bad(KindVarintUnterminated), ok(-128)), boolean: per(bad(KindVarintUnterminated), bad(KindInvalidBool)),
		float32: both(ok(math.Copysign(0, -1))), float64: both(ok(math.Copysign(0, -1))),
	},
	// Bools are strict (the reference reads 2 as false).
	"bool_value_2": {
		int32: both(ok(2)), boolean: both(bad(KindInvalidBool)),
		float32: both(ok(float64(math.Float32frombits(0x02000000)))),
		float64: both(ok(math.Float64frombits(0x0200000000000000))),
	},
	"float32_5_bytes": {
		int32: per(bad(KindTrailingBytes), bad(KindVarintOverflow)), boolean: per(bad(KindTrailingBytes), bad(KindInvalidBool)),
		float32: both(bad(KindInvalidLength)),
		float64: both(ok(math.Float64frombits(0x3fc0000001000000))),
	},
	"float64_9_bytes": {
		int32: per(bad(KindTrailingBytes), bad(KindVarintOverflow)), boolean: per(bad(KindTrailingBytes), bad(KindVarintOverflow)),
		float32: both(bad(KindInvalidLength)), float64: both(bad(KindInvalidLength)),
	},
	// The reference reads 0x51 as key 0x11 and drops the array bit; we refuse the tag.
	"tag_with_slice_flag_on_primitive (0x51)": {decode: KindInvalidTag, fields: map[string]uint64{"tag": 0x51}},
	"node_empty_buffer":                       {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 1}},
	"node_tag_only":                           {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 1}},
	"node_length_0":                           {children: 0},
	// The references panic (slice bounds out of range).
	"node_length_exceeds_buffer": {decode: KindUnexpectedEnd, fields: map[string]uint64{"needed": 2}},
	"node_child_truncated":       {decode: KindChildOverflow, fields: map[string]uint64{"declared": 5, "available": 1}},
	// y3-codec-golang panics in makeslice.
	"node_negative_length (0x7f)":    {decode: KindNegativeLength, fields: map[string]uint64{"declared": uint64(1<<64 - 1)}},
	"node_child_negative_length":     {decode: KindNegativeLength, fields: map[string]uint64{"declared": uint64(1<<64 - 1)}},
	"node_child_length_unterminated": {decode: KindTruncatedHeader, fields: map[string]uint64{"available": 2}},
	"node_trailing_bytes":            {decode: KindTrailingBytes, fields: map[string]uint64{"count": 1}},
	"node_child_is_single_byte":      {decode: KindTruncatedHeader, fields: map[string]uint64{"available": 1}},
}

func (a acc) check(t *testing.T, what string, v float64, err error) {
	t.Helper()
	if a.kind != "" {
		wantKind(t, err, a.kind)
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if math.Float64bits(v) != math.Float64bits(a.val) {
		t.Fatalf("%s = %v, want %v", what, v, a.val)
	}
}

// TestMalformedBehaviour runs every entry of malformed-behaviour.json through Decode and the
// accessors in the library's dialect, and checks our documented outcome.
func TestMalformedBehaviour(t *testing.T) {
	entries := loadMalformed(t)
	if len(entries) < 60 {
		t.Fatalf("%d entries", len(entries))
	}
	used := map[string]bool{}
	for _, m := range entries {
		t.Run(m.Name+"/"+m.Lib+"/"+m.Call, func(t *testing.T) {
			exp, found := malformedExpect[m.Name]
			if !found {
				t.Fatalf("malformed entry %q is not covered", m.Name)
			}
			used[m.Name] = true
			d := Golang
			switch m.Lib {
			case "y3 v1.0.5":
				d = NVarInt
			case "y3-codec-golang v1.7.3":
			default:
				t.Fatalf("lib %q", m.Lib)
			}
			in := mustHex(t, m.InputHex)
			c := ConfigFor(d)
			p, err := c.Decode(in)
			if exp.decode != "" {
				e := wantKind(t, err, exp.decode)
				for k, want := range exp.fields {
					got := map[string]uint64{
						"needed": e.Needed, "declared": uint64(e.Declared), "available": e.Available,
						"count": e.Count, "tag": uint64(e.Tag),
					}[k]
					if got != want {
						t.Fatalf("%s = %d, want %d (%v)", k, got, want, e)
					}
				}
				// The streaming validator agrees, at every split. It validates a stream of
				// packets, so trailing bytes are the start of a next, truncated packet.
				switch {
				case len(in) == 0:
					// An empty stream is a complete stream of zero packets.
					checkValidatorSplits(t, c, in, "")
				case exp.decode == KindTrailingBytes:
					checkValidatorSplits(t, c, in[:len(in)-int(e.Count)], "")
				default:
					checkValidatorSplits(t, c, in, exp.decode)
				}
				return
			}
			must(t, err)
			checkValidatorSplits(t, c, in, "")
			if p.IsNode() {
				n := 0
				for _, err := range p.Children() {
					must(t, err)
					n++
				}
				if n != exp.children {
					t.Fatalf("%d children", n)
				}
				return
			}
			i32, err := p.Int32()
			exp.int32[d].check(t, "Int32", float64(i32), err)
			b, err := p.Bool()
			bv := 0.0
			if b {
				bv = 1
			}
			exp.boolean[d].check(t, "Bool", bv, err)
			f32, err := p.Float32()
			exp.float32[d].check(t, "Float32", float64(f32), err)
			f64, err := p.Float64()
			exp.float64[d].check(t, "Float64", f64, err)
		})
	}
	for name := range malformedExpect {
		if !used[name] {
			t.Errorf("expectation %q matches no entry", name)
		}
	}
}

// checkValidatorSplits feeds in to a validator in two chunks at every split point and one
// byte at a time, expecting the one-shot outcome.
func checkValidatorSplits(t *testing.T, c Config, in []byte, want Kind) {
	t.Helper()
	run := func(chunks [][]byte) Kind {
		o := NewValidator(c)
		for _, ch := range chunks {
			for len(ch) > 0 {
				n, v, err := o.Feed(ch)
				if err != nil {
					return KindOf(err)
				}
				if v != nil {
					t.Fatal("validator observed a value")
				}
				ch = ch[n:]
			}
		}
		return kindOf(o.Finish())
	}
	if got := run([][]byte{in}); got != want {
		t.Fatalf("one-shot validator: %q, want %q", got, want)
	}
	for i := 0; i <= len(in); i++ {
		if got := run([][]byte{in[:i], in[i:]}); got != want {
			t.Fatalf("split at %d: %q, want %q", i, got, want)
		}
	}
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	if got := run(bytewise); got != want {
		t.Fatalf("bytewise: %q, want %q", got, want)
	}
}
