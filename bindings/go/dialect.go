package y3

// Dialect is the flavour of Y3 the bytes are in.
//
//	          tag                        integers                  node flag on wire
//	Golang    1 byte: N A i i i i i i    PVarInt (sign-padded)     yes (N = 0x80, A = 0x40)
//	NVarInt   1 byte: N A i i i i i i    minimal two's complement  yes
//	Draft02   varint: C i i i i i i i .. PVarInt (sign-padded)     no (the schema decides)
//
// Lengths (signed PVarInt32) and floats (VarFloat) are the same in all three.
type Dialect uint8

const (
	// Golang is github.com/yomorun/y3-codec-golang v1.7.3, the codec of YoMo v1. The default
	// (the zero value).
	Golang Dialect = iota
	// NVarInt is github.com/yomorun/y3 v1.0.5, the frame envelope of YoMo >= 1.5: integers
	// are minimal big-endian two's complement with no continuation bits.
	NVarInt
	// Draft02 is the draft-02 varint tag (continuation bit + 7 id bits, no node or array
	// flag on the wire), so a node can hold more than 63 keys. Opt-in.
	Draft02
)

// draft02MaxID is the largest id a draft-02 tag carries: four 7-bit groups.
const draft02MaxID = 1<<28 - 1

// MaxTag is the largest tag id the dialect can write.
func (d Dialect) MaxTag() uint32 {
	if d == Draft02 {
		return draft02MaxID
	}
	return 0x3f
}

// HasNodeFlag reports whether the wire marks nodes and arrays in the tag (false in Draft02).
func (d Dialect) HasNodeFlag() bool { return d != Draft02 }

// String returns the dialect's name as the CLI and the other bindings spell it.
func (d Dialect) String() string {
	switch d {
	case Golang:
		return "golang"
	case NVarInt:
		return "nvarint"
	case Draft02:
		return "draft02"
	}
	return "dialect(?)"
}

// ParseDialect parses a name produced by Dialect.String.
func ParseDialect(name string) (Dialect, bool) {
	switch name {
	case "golang":
		return Golang, true
	case "nvarint":
		return NVarInt, true
	case "draft02":
		return Draft02, true
	}
	return Golang, false
}

// Default limits.
const (
	// DefaultMaxPacketLen is the default largest declared value length: 16 MiB.
	DefaultMaxPacketLen = 16 << 20
	// DefaultMaxDepth is the default deepest nesting (the outermost packet is depth 1).
	DefaultMaxDepth = 64
)

// Limits are checked against the wire before anything is allocated or entered. A zero field
// means the default.
type Limits struct {
	// MaxPacketLen is the largest declared length of any packet's value, in bytes. A larger
	// one is refused (too_long) as soon as its header is read.
	MaxPacketLen uint64
	// MaxDepth is the deepest nesting of nodes, the outermost packet being depth 1: a packet
	// at depth MaxDepth cannot be entered (too_deep).
	MaxDepth uint32
}

// Config is a dialect with its limits: what every decoding entry point needs. The zero
// value is the Golang dialect with default limits.
type Config struct {
	Dialect Dialect
	Limits  Limits
}

// DefaultConfig is the Golang dialect with default limits.
var DefaultConfig = Config{}

// ConfigFor returns a config for dialect d with default limits.
func ConfigFor(d Dialect) Config { return Config{Dialect: d} }

// norm fills zero limits with the defaults.
func (c Config) norm() Config {
	if c.Limits.MaxPacketLen == 0 {
		c.Limits.MaxPacketLen = DefaultMaxPacketLen
	}
	if c.Limits.MaxDepth == 0 {
		c.Limits.MaxDepth = DefaultMaxDepth
	}
	return c
}
