package client

import (
	"encoding/binary"
	"unicode/utf8"

	y3 "github.com/y3-dev/y3/bindings/go"
)

// frameConfig is the codec configuration frames are read with: the NVarInt dialect, the
// frame limit as the packet limit, the frame and its fields as the only levels.
func frameConfig(maxLen int) y3.Config {
	return y3.Config{
		Dialect: dialect,
		Limits:  y3.Limits{MaxPacketLen: uint64(frameLimit(maxLen)), MaxDepth: maxDepth},
	}
}

// DecodeFrame decodes buf, which must hold exactly one frame (header included). maxLen is
// the frame limit (zero or less: DefaultMaxFrameLen).
//
// The Payload, RawMetadata and FunctionDefinition of a frame are slices of buf, not copies;
// strings and the metadata map are copies.
//
// Errors: the codec's kinds for a malformed packet (unexpected_end, child_overflow,
// invalid_length, wrong_type, trailing_bytes, ...), too_long, unknown_frame for a packet
// that is not a known frame node, invalid_field and bad_metadata.
func DecodeFrame(buf []byte, maxLen int) (Frame, error) {
	cfg := frameConfig(maxLen)
	p, t, err := parseFrame(buf, &cfg)
	if err != nil {
		return nil, err
	}
	f, err := decodePacket(p, t)
	if err != nil {
		return nil, err
	}
	if d, ok := f.(Data); ok {
		if d.Metadata, err = DecodeMetadata(d.RawMetadata); err != nil {
			return nil, err
		}
		return d, nil
	}
	return f, nil
}

// parseFrame reads the frame packet of buf, which must hold exactly one.
func parseFrame(buf []byte, cfg *y3.Config) (y3.Packet, FrameType, error) {
	p, rest, err := cfg.Parse(buf)
	if err != nil {
		return p, 0, codecError(err)
	}
	if len(rest) != 0 {
		return p, 0, codecError(&y3.Error{Kind: y3.KindTrailingBytes, Count: uint64(len(rest))})
	}
	t := FrameType(p.ID())
	if !p.IsNode() || p.IsArray() || p.ID() > 0x3f || !t.known() {
		return p, 0, &Error{Kind: KindUnknownFrame, Tag: p.ID()}
	}
	return p, t, nil
}

// fields calls each for every field of p (a nested node included: the callers skip ids
// they do not know and refuse a node where they expect a value).
func fields(p y3.Packet, each func(f y3.Packet) error) error {
	it, err := p.ChildIter()
	if err != nil {
		return codecError(err)
	}
	for it.Next() {
		if err := each(it.Packet()); err != nil {
			return codecError(err)
		}
	}
	return codecError(it.Err())
}

// str reads a string field. Strings are not checked for UTF-8, as YoMo does not check them.
func str(f y3.Packet) (string, error) {
	b, err := f.BytesValue()
	return string(b), err
}

// bytesField reads a bytes field, borrowed; empty is nil, as YoMo reads it.
func bytesField(f y3.Packet) ([]byte, error) {
	b, err := f.BytesValue()
	if len(b) == 0 {
		b = nil
	}
	return b, err
}

func decodePacket(p y3.Packet, t FrameType) (Frame, error) {
	switch t {
	case TypeHandshake:
		return decodeHandshake(p)
	case TypeHandshakeAck:
		// No fields; whatever is there is skipped (but must be well-formed).
		return HandshakeAck{}, fields(p, func(y3.Packet) error { return nil })
	case TypeRejected, TypeGoaway:
		var msg string
		var code uint32
		var has bool
		err := fields(p, func(f y3.Packet) (err error) {
			switch f.ID() {
			case fMessage:
				msg, err = str(f)
			case fCode:
				code, err = f.Uint32()
				has = true
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		if t == TypeRejected {
			return Rejected{Message: msg, Code: Code(code), HasCode: has}, nil
		}
		return Goaway{Message: msg, Code: Code(code), HasCode: has}, nil
	case TypeStored:
		var st Stored
		err := fields(p, func(f y3.Packet) (err error) {
			switch f.ID() {
			case fCount:
				st.Count, err = f.Uint32()
			case fRefused:
				var b []byte
				if b, err = f.BytesValue(); err == nil {
					st.Refused, err = decodeRefused(b)
				}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		return st, nil
	case TypeConnectTo:
		var c ConnectTo
		err := fields(p, func(f y3.Packet) (err error) {
			if f.ID() == fEndpoint {
				c.Endpoint, err = str(f)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		return c, nil
	default: // data
		var d Data
		if err := decodeDataInto(p, &d); err != nil {
			return nil, err
		}
		return d, nil
	}
}

func decodeHandshake(p y3.Packet) (Frame, error) {
	var h Handshake
	var clientType []byte
	var observed []byte
	err := fields(p, func(f y3.Packet) (err error) {
		switch f.ID() {
		case fName:
			h.Name, err = str(f)
		case fID:
			h.ID, err = str(f)
		case fClientType:
			clientType, err = f.BytesValue()
		case fObserved:
			observed, err = f.BytesValue()
		case fAuthName:
			h.AuthName, err = str(f)
		case fAuthPayload:
			h.AuthPayload, err = str(f)
		case fVersion:
			h.Version, err = str(f)
		case fFunctionDef:
			h.FunctionDefinition, err = bytesField(f)
		case fWantedTarget:
			h.WantedTarget, err = str(f)
		case fExtensionLevel:
			h.ExtensionLevel, err = f.Uint32()
		case fWantsAcks:
			var v uint32
			v, err = f.Uint32()
			h.WantsAcks = v != 0
		case fFilters:
			var b []byte
			if b, err = f.BytesValue(); err == nil {
				h.Filters, err = decodeFilters(b)
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// Exactly one byte: YoMo's zipper crashes on an empty one (spec/frames.md).
	if len(clientType) != 1 {
		return nil, &Error{Kind: KindInvalidField, Frame: "handshake", FieldName: "client_type"}
	}
	h.ClientType = ClientType(clientType[0])
	// 4-byte groups; a tail shorter than 4 bytes is ignored, as YoMo ignores it.
	if len(observed) >= 4 {
		h.Observed = make([]uint32, len(observed)/4)
		for i := range h.Observed {
			h.Observed[i] = binary.LittleEndian.Uint32(observed[4*i:])
		}
	}
	return h, nil
}

// decodeRefused reads a stored frame's refused runs: first u32 LE | frames u32 LE | reason.
func decodeRefused(b []byte) ([]RefusedRun, error) {
	if len(b)%refusedRunLen != 0 {
		return nil, &Error{Kind: KindInvalidField, Frame: "stored", FieldName: "refused"}
	}
	out := make([]RefusedRun, 0, len(b)/refusedRunLen)
	for ; len(b) > 0; b = b[refusedRunLen:] {
		out = append(out, RefusedRun{First: binary.LittleEndian.Uint32(b),
			Frames: binary.LittleEndian.Uint32(b[4:]), Reason: RefusedReason(b[8])})
	}
	return out, nil
}

// decodeFilters reads the handshake's filters field: tag u32 LE | length u32 LE | text.
func decodeFilters(b []byte) ([]Filter, error) {
	bad := &Error{Kind: KindInvalidField, Frame: "handshake", FieldName: "filters"}
	var out []Filter
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, bad
		}
		tag, n := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
		if uint64(n) > uint64(len(b)-8) || !utf8.Valid(b[8:8+n]) {
			return nil, bad
		}
		out = append(out, Filter{Tag: tag, Text: string(b[8 : 8+n])})
		b = b[8+n:]
	}
	return out, nil
}

// decodeDataInto decodes a data frame's fields into d, checking the metadata but leaving
// d.Metadata nil (a cursor rather than a callback: this is the hot path, and it does not
// allocate).
func decodeDataInto(p y3.Packet, d *Data) error {
	*d = Data{}
	it, err := p.ChildIter()
	if err != nil {
		return codecError(err)
	}
	for it.Next() {
		f := it.Packet()
		var err error
		switch f.ID() {
		case fTag:
			d.Tag, err = f.Uint32()
		case fMetadata:
			d.RawMetadata, err = f.BytesValue()
		case fPayload:
			d.Payload, err = f.BytesValue()
		case fHops:
			d.Hops, err = f.Uint32()
		}
		if err != nil {
			return codecError(err)
		}
	}
	if err := it.Err(); err != nil {
		return codecError(err)
	}
	// A missing tag reads as 0, as YoMo reads it (its decoder would fail on an empty one,
	// which Uint32 refuses above too).
	if len(d.RawMetadata) == 0 {
		d.RawMetadata = nil
	}
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	return CheckMetadata(d.RawMetadata)
}
