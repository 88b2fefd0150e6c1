package main

import (
	"encoding/json"
	"strconv"

	"github.com/buger/jsonparser"
	"github.com/tidwall/gjson"
	y3 "github.com/yomorun/y3-codec-golang"
	"github.com/yomorun/y3-codec-golang/pkg/encoding"
)

// dataset is one data set from the lab's data file: the same pairs as Y3 bytes and JSON.
type dataset struct {
	Case         string `json:"case"`
	Order        string `json:"order"`
	Position     string `json:"position"`
	KeyPos       int    `json:"key_pos"`
	Count        int    `json:"count"`
	Key          int    `json:"key"`
	Keys         []int  `json:"keys"`
	ExpectedType string `json:"expected_type"`
	Expected     string `json:"expected"`
	Y3Hex        string `json:"y3_hex"`
	JSON         string `json:"json"`

	y3   []byte // decoded Y3Hex
	json []byte // JSON as bytes
	want value  // parsed expected value
	name string // "k<Key>"
}

// impl is one Go implementation: prepare returns its input size and a factory of ops
// (one op per goroutine); an op extracts the observed value once.
type impl struct {
	name    string
	format  string
	op      string
	prepare func(ds *dataset) (bytes int, factory func() func() value)
}

var impls = []impl{
	{"go-y3-report", "y3", "report method", prepareReport},
	{"go-y3-decode", "y3", "decode+find", prepareDecode},
	{"go-y3-scan", "y3", "scan", prepareScan},
	{"go-json-map", "json", "unmarshal map", prepareJSONMap},
	{"go-gjson", "json", "get", prepareGjson},
	{"go-jsonparser", "json", "get", prepareJsonparser},
}

// primitiveValue converts a y3-codec-golang primitive packet to the wanted type.
func primitiveValue(p *y3.PrimitivePacket, kind string) value {
	if p == nil {
		return missing
	}
	v := value{kind: kind}
	var err error
	switch kind {
	case "string":
		v.s, err = p.ToUTF8String()
	case "int32":
		var x int32
		x, err = p.ToInt32()
		v.i = int64(x)
	case "int64":
		v.i, err = p.ToInt64()
	case "uint32":
		var x uint32
		x, err = p.ToUInt32()
		v.u = uint64(x)
	case "uint64":
		v.u, err = p.ToUInt64()
	case "float32":
		var x float32
		x, err = p.ToFloat32()
		v.f = float64(x)
	case "float64":
		v.f, err = p.ToFloat64()
	}
	if err != nil {
		return missing
	}
	return v
}

// rawValue decodes the value bytes of a primitive packet with the reference encodings.
func rawValue(b []byte, kind string) value {
	if b == nil {
		return missing
	}
	v := value{kind: kind}
	var err error
	codec := encoding.VarCodec{}
	if kind == "float32" || kind == "float64" {
		// VarFloat drops trailing zero bytes; the decoder takes the length as Size.
		codec.Size = len(b)
	}
	switch kind {
	case "string":
		v.s = string(b)
	case "int32":
		var x int32
		err = codec.DecodePVarInt32(b, &x)
		v.i = int64(x)
	case "int64":
		err = codec.DecodePVarInt64(b, &v.i)
	case "uint32":
		var x uint32
		err = codec.DecodePVarUInt32(b, &x)
		v.u = uint64(x)
	case "uint64":
		err = codec.DecodePVarUInt64(b, &v.u)
	case "float32":
		var x float32
		err = codec.DecodeVarFloat32(b, &x)
		v.f = float64(x)
	case "float64":
		err = codec.DecodeVarFloat64(b, &v.f)
	}
	if err != nil {
		return missing
	}
	return v
}

// takeReport reproduces the method of the report's TakeValueFromCodec: it walks the
// buffer one byte at a time, copying the tag and length bytes of each packet into fresh
// slices and decoding the length with the library's PVarInt decoder after every length
// byte. On a key other than the observed one it recurses on the buffer past that packet
// (or past its header, which enters the root node). On the observed key it copies the
// packet and decodes it with y3.DecodePrimitivePacket.
func takeReport(key byte, buf []byte) *y3.PrimitivePacket {
	var (
		tag     byte
		haveTag bool
		sbuf    = make([]byte, 0)
		lbuf    = make([]byte, 0)
		size    int32
		length  int32
	)
	for _, c := range buf {
		if !haveTag {
			tag, haveTag = c, true
			sbuf = append(sbuf, c)
			continue
		}
		if size == 0 {
			lbuf = append(lbuf, c)
			sbuf = append(sbuf, c)
			codec := encoding.VarCodec{}
			if err := codec.DecodePVarInt32(lbuf, &length); err != nil {
				continue
			}
			size = int32(codec.Size)
			continue
		}
		if key != tag&0x3f {
			if len(buf) > int(1+size+length) {
				return takeReport(key, buf[1+size+length:])
			}
			return takeReport(key, buf[1+size:])
		}
		sbuf = append(sbuf, c)
		if int32(len(sbuf)) == 1+size+length {
			if tag&0x80 != 0 {
				return nil // the data sets observe primitives only
			}
			p, _, _, err := y3.DecodePrimitivePacket(sbuf)
			if err != nil {
				return nil
			}
			return p
		}
	}
	return nil
}

func prepareReport(ds *dataset) (int, func() func() value) {
	key, kind, buf := byte(ds.Key), ds.want.kind, ds.y3
	return len(buf), func() func() value {
		return func() value { return primitiveValue(takeReport(key, buf), kind) }
	}
}

// findDecoded is the "full decode, then find" method with y3-codec-golang v1.7.3.
func findDecoded(key byte, buf []byte) *y3.PrimitivePacket {
	node, _, err := y3.DecodeNodePacket(buf)
	if err != nil {
		return nil
	}
	for i := range node.PrimitivePackets {
		if node.PrimitivePackets[i].SeqID() == key {
			return &node.PrimitivePackets[i]
		}
	}
	return nil
}

func prepareDecode(ds *dataset) (int, func() func() value) {
	key, kind, buf := byte(ds.Key), ds.want.kind, ds.y3
	return len(buf), func() func() value {
		return func() value { return primitiveValue(findDecoded(key, buf), kind) }
	}
}

// pvarLen decodes a PVarInt length; n is 0 when the input is malformed or short.
func pvarLen(b []byte) (length int, n int) {
	var v int64
	for n < len(b) && n < 5 {
		c := b[n]
		if n == 0 && c&0x40 != 0 {
			return 0, 0 // negative
		}
		v = v<<7 | int64(c&0x7f)
		n++
		if c&0x80 == 0 {
			return int(v), n
		}
	}
	return 0, 0
}

// scanY3 is a plain skip-scan: read the root header, then walk the children's headers and
// skip their values until the observed primitive key.
func scanY3(buf []byte, key byte) []byte {
	if len(buf) < 2 {
		return nil
	}
	_, n := pvarLen(buf[1:])
	if n == 0 {
		return nil
	}
	i := 1 + n
	for i < len(buf) {
		tag := buf[i]
		l, n := pvarLen(buf[i+1:])
		if n == 0 {
			return nil
		}
		i += 1 + n
		if i+l > len(buf) {
			return nil
		}
		if tag&0x3f == key && tag&0x80 == 0 {
			return buf[i : i+l]
		}
		i += l
	}
	return nil
}

func prepareScan(ds *dataset) (int, func() func() value) {
	key, kind, buf := byte(ds.Key), ds.want.kind, ds.y3
	return len(buf), func() func() value {
		return func() value { return rawValue(scanY3(buf, key), kind) }
	}
}

const tokenEnd = '\n'

// takeJSONMap reproduces the report's TakeValueFromJson: copy the input byte by byte up
// to the end token, json.Unmarshal into map[string]interface{}, then range over the map.
func takeJSONMap(key string, buf []byte) interface{} {
	sbuf := make([]byte, 0)
	for _, c := range buf {
		if c == tokenEnd {
			var m map[string]interface{}
			if err := json.Unmarshal(sbuf, &m); err != nil {
				return nil
			}
			for k, v := range m {
				if k == key {
					return v
				}
			}
		}
		sbuf = append(sbuf, c)
	}
	return nil
}

func prepareJSONMap(ds *dataset) (int, func() func() value) {
	name := ds.name
	buf := append(append([]byte{}, ds.json...), tokenEnd)
	return len(ds.json), func() func() value {
		return func() value {
			switch v := takeJSONMap(name, buf).(type) {
			case string:
				return value{kind: "string", s: v}
			case float64:
				return value{kind: "number", f: v}
			}
			return missing
		}
	}
}

func prepareGjson(ds *dataset) (int, func() func() value) {
	name, kind, buf := ds.name, ds.want.kind, ds.json
	return len(buf), func() func() value {
		return func() value {
			r := gjson.GetBytes(buf, name)
			if !r.Exists() {
				return missing
			}
			v := value{kind: kind}
			switch kind {
			case "string":
				v.s = r.String()
			case "int32", "int64":
				v.i = r.Int()
			case "uint32", "uint64":
				v.u = r.Uint()
			default:
				v.f = r.Float()
				if kind == "float32" {
					v.f = float64(float32(v.f))
				}
			}
			return v
		}
	}
}

func prepareJsonparser(ds *dataset) (int, func() func() value) {
	name, kind, buf := ds.name, ds.want.kind, ds.json
	return len(buf), func() func() value {
		return func() value {
			raw, typ, _, err := jsonparser.Get(buf, name)
			if err != nil {
				return missing
			}
			v := value{kind: kind}
			switch kind {
			case "string":
				if typ != jsonparser.String {
					return missing
				}
				v.s, err = jsonparser.ParseString(raw)
			case "int32", "int64":
				v.i, err = jsonparser.ParseInt(raw)
			case "uint32", "uint64":
				v.u, err = strconv.ParseUint(string(raw), 10, 64)
			default:
				v.f, err = jsonparser.ParseFloat(raw)
				if kind == "float32" {
					v.f = float64(float32(v.f))
				}
			}
			if err != nil {
				return missing
			}
			return v
		}
	}
}

// referencePacket encodes ascending pairs with the y3-codec-golang v1.7.3 encoder, to
// check that the lab's bytes are what the reference writes.
func referencePacket(ds *dataset) ([]byte, error) {
	root := y3.NewNodePacketEncoder(0x00)
	for _, k := range ds.Keys {
		want, err := parseExpected(kindFor(k), textFor(k))
		if err != nil {
			return nil, err
		}
		p := y3.NewPrimitivePacketEncoder(k)
		switch want.kind {
		case "string":
			p.SetStringValue(want.s)
		case "int32":
			p.SetInt32Value(int32(want.i))
		case "uint32":
			p.SetUInt32Value(uint32(want.u))
		case "int64":
			p.SetInt64Value(want.i)
		case "uint64":
			p.SetUInt64Value(want.u)
		case "float32":
			p.SetFloat32Value(float32(want.f))
		case "float64":
			p.SetFloat64Value(want.f)
		}
		root.AddPrimitivePacket(p)
	}
	return root.Encode(), nil
}

// kindFor and textFor give the value of key k (1-based), cycling as the report's
// generator does.
func kindFor(k int) string {
	return [...]string{"string", "int32", "uint32", "int64", "uint64", "float32", "float64"}[(k-1)%7]
}

func textFor(k int) string {
	return [...]string{"a", "-65", "128", "-1", "18446744073709551615", "0.25", "23"}[(k-1)%7]
}
