package client

import (
	y3 "github.com/y3-dev/y3/bindings/go"
)

// frameConfig is the codec configuration frames are read with: the Golang dialect, the
// frame limit as the packet limit, four levels of nesting.
func frameConfig(maxLen int) y3.Config {
	return y3.Config{
		Dialect: y3.Golang,
		Limits:  y3.Limits{MaxPacketLen: uint64(frameLimit(maxLen)), MaxDepth: maxDepth},
	}
}

// DecodeFrame decodes buf, which must hold exactly one frame (header included). maxLen is
// the frame limit (zero or less: DefaultMaxFrameLen).
//
// The Payload and Metadata of a Data frame are slices of buf, not copies; strings are
// copied.
//
// Errors, in the Rust decoder's order: the codec's kinds for a malformed packet
// (unexpected_end, child_overflow, invalid_utf8, wrong_type, trailing_bytes, ...),
// too_long, unknown_frame for a packet that is not a known frame node, missing_field and
// invalid_field.
func DecodeFrame(buf []byte, maxLen int) (Frame, error) {
	return decodeFrame(buf, frameConfig(maxLen))
}

func missing(t FrameType, field uint32) error {
	return &Error{Kind: KindMissingField, Frame: t.String(), Field: field}
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
	if !p.IsNode() || p.ID() > 0x3f || !t.known() {
		return p, 0, &Error{Kind: KindUnknownFrame, Tag: p.ID()}
	}
	return p, t, nil
}

func decodeFrame(buf []byte, cfg y3.Config) (Frame, error) {
	p, t, err := parseFrame(buf, &cfg)
	if err != nil {
		return nil, err
	}
	return decodePacket(p, t)
}

func decodePacket(p y3.Packet, t FrameType) (Frame, error) {
	switch t {
	case TypeHandshake:
		return decodeHandshake(p)
	case TypeAccepted:
		var a Accepted
		var haveVersion, haveSession bool
		for f, err := range p.Children() {
			if err != nil {
				return nil, codecError(err)
			}
			switch f.ID() {
			case fVersion:
				if a.Version, err = f.Uint32(); err != nil {
					return nil, codecError(err)
				}
				haveVersion = true
			case fSession:
				if a.Session, err = f.Uint64(); err != nil {
					return nil, codecError(err)
				}
				haveSession = true
			}
		}
		if !haveVersion {
			return nil, missing(t, fVersion)
		}
		if !haveSession {
			return nil, missing(t, fSession)
		}
		return a, nil
	case TypeData:
		return decodeData(p)
	case TypeGoaway:
		var x Goaway
		var haveCode bool
		for f, err := range p.Children() {
			if err != nil {
				return nil, codecError(err)
			}
			switch f.ID() {
			case fCode:
				c, err := f.Uint32()
				if err != nil {
					return nil, codecError(err)
				}
				x.Code, haveCode = GoawayCode(c), true
			case fReason:
				if x.Reason, err = f.String(); err != nil {
					return nil, codecError(err)
				}
			}
		}
		if !haveCode {
			return nil, missing(t, fCode)
		}
		return x, nil
	default: // ping, pong
		var nonce uint64
		var have bool
		for f, err := range p.Children() {
			if err != nil {
				return nil, codecError(err)
			}
			if f.ID() == fNonce {
				if nonce, err = f.Uint64(); err != nil {
					return nil, codecError(err)
				}
				have = true
			}
		}
		if !have {
			return nil, missing(t, fNonce)
		}
		if t == TypePing {
			return Ping{Nonce: nonce}, nil
		}
		return Pong{Nonce: nonce}, nil
	}
}

func decodeHandshake(p y3.Packet) (Frame, error) {
	var h Handshake
	var haveVersion, haveRole bool
	var role uint32
	for f, err := range p.Children() {
		if err != nil {
			return nil, codecError(err)
		}
		switch f.ID() {
		case fVersion:
			if h.Version, err = f.Uint32(); err != nil {
				return nil, codecError(err)
			}
			haveVersion = true
		case fRole:
			if role, err = f.Uint32(); err != nil {
				return nil, codecError(err)
			}
			haveRole = true
		case fName:
			if h.Name, err = f.String(); err != nil {
				return nil, codecError(err)
			}
		case fToken:
			if h.Token, err = f.String(); err != nil {
				return nil, codecError(err)
			}
		case fObserved:
			h.Observed = h.Observed[:0]
			for e, err := range f.Children() {
				if err != nil {
					return nil, codecError(err)
				}
				t, err := e.Uint32()
				if err != nil {
					return nil, codecError(err)
				}
				h.Observed = append(h.Observed, t)
			}
		}
	}
	// The Rust decoder's order: role, then version, then the role's range.
	if !haveRole {
		return nil, missing(TypeHandshake, fRole)
	}
	if !haveVersion {
		return nil, missing(TypeHandshake, fVersion)
	}
	h.Role = Role(role)
	if !h.Role.valid() {
		return nil, &Error{Kind: KindInvalidField, Frame: "handshake", FieldName: "role"}
	}
	if len(h.Observed) == 0 {
		h.Observed = nil
	}
	return h, nil
}

func decodeData(p y3.Packet) (Frame, error) {
	var d Data
	if err := decodeDataInto(p, &d); err != nil {
		return nil, err
	}
	return d, nil
}

// decodeDataInto decodes a data frame's fields into d (a cursor rather than a range-over-
// func loop: this is the hot path).
func decodeDataInto(p y3.Packet, d *Data) error {
	*d = Data{}
	var haveTag, haveID bool
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
			haveTag = true
		case fID:
			d.ID, err = f.Uint64()
			haveID = true
		case fHops:
			d.Hops, err = f.Uint32()
		case fMetadata:
			d.Metadata, err = f.BytesValue()
			if d.Metadata == nil {
				d.Metadata = []byte{}
			}
		case fPayload:
			d.Payload, err = f.BytesValue()
			if d.Payload == nil {
				d.Payload = []byte{}
			}
		}
		if err != nil {
			return codecError(err)
		}
	}
	if err := it.Err(); err != nil {
		return codecError(err)
	}
	if !haveTag {
		return missing(TypeData, fTag)
	}
	if !haveID {
		return missing(TypeData, fID)
	}
	if d.Payload == nil {
		return missing(TypeData, fPayload)
	}
	return nil
}
