package y3

import (
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// The streaming key observer: one state machine for one-shot and chunked input.
//
// The observer walks TLV headers as bytes arrive. For every packet it decides, from the
// header alone, to skip it (count its length down, never copy), enter it (its key is a
// prefix of a subscribed path) or take it (its key ends a subscribed path). A taken value is
// handed out as soon as its last byte has arrived: borrowed from the input when it lies in
// one chunk, assembled in an internal buffer only when it straddles chunks.
//
//	input chunks:  | 80 81 61 01 01 | 61 02 02 ff 3f ... | 20 02 ff 3f 21 ...
//	                 ^  ^  ^-skip-^   ^-skip-^              ^ take 0x20
//	                 |  length 225
//	                 node 0x00: enter (path 0x00/0x20)
//
// State survives chunk boundaries: a header split across chunks waits in a 9-byte scratch
// buffer (the longest header), a skipped value is a counter, and a taken value is either
// borrowed or assembled. "Need more bytes" is not an error; truncation is reported only by
// Finish.

const (
	// MaxPathDepth is the longest key path an observer accepts.
	MaxPathDepth = 16
	// MaxSubscriptions is the most key paths one observer holds.
	MaxSubscriptions = 64
)

// Path is a key path: Path{0x10, 0x11} is child 0x11 of each top-level packet 0x10.
type Path []uint32

// String renders the path as "0x10/0x11".
func (p Path) String() string {
	var b strings.Builder
	for i, id := range p {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString("0x")
		if id < 0x10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.FormatUint(uint64(id), 16))
	}
	return b.String()
}

// ParsePath parses a key path such as "0x10/0x11" or "16/17" (hex with 0x, else decimal).
// Errors: path_syntax (with the byte offset of the bad key), empty_path, path_too_deep.
func ParsePath(text string) (Path, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, &Error{Kind: KindEmptyPath, Op: OpPath}
	}
	var keys Path
	at := 0
	for _, part := range strings.Split(text, "/") {
		digits, base := part, 10
		if strings.HasPrefix(part, "0x") || strings.HasPrefix(part, "0X") {
			digits, base = part[2:], 16
		}
		// Like Rust's integer parsing, one leading '+' is allowed.
		if strings.HasPrefix(digits, "+") {
			digits = digits[1:]
		}
		if digits == "" || digits[0] == '+' || digits[0] == '-' {
			return nil, &Error{Kind: KindPathSyntax, Op: OpPath, At: at}
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return nil, &Error{Kind: KindPathSyntax, Op: OpPath, At: at}
		}
		keys = append(keys, uint32(v))
		at += len(part) + 1
	}
	if len(keys) > MaxPathDepth {
		return nil, &Error{Kind: KindPathTooDeep, Op: OpPath, Len: uint64(len(keys)), Max: MaxPathDepth}
	}
	return keys, nil
}

// Observed is a value taken for a subscription. Its Packet (tag, value and the typed
// accessors) borrows the fed chunk when the value lay in one chunk (Assembled false), else
// the observer's buffer; either way it is valid only until the next call on the observer.
type Observed struct {
	Packet
	// Sub is the index of the subscribed path, in the order given to NewObserver.
	Sub int
	// Assembled reports that the value straddled chunks and was copied.
	Assembled bool
}

// level is one open node along the walk.
type level struct {
	end    uint64 // absolute stream offset where the node's value ends (MaxUint64 at the top)
	active uint64 // subscriptions whose keys matched every enclosing node so far
	want   uint64 // one-byte dialects: bit id set when an active path continues with id
}

// levelStack holds the enclosing levels: inline for shallow trees, so that one-shot calls
// allocate nothing, spilling to the heap below 4 levels.
type levelStack struct {
	inline [4]level
	spill  []level
	n      int
}

func (s *levelStack) push(l level) {
	if s.n < len(s.inline) {
		s.inline[s.n] = l
	} else {
		s.spill = append(s.spill, l)
	}
	s.n++
}

func (s *levelStack) pop() level {
	s.n--
	if s.n < len(s.inline) {
		return s.inline[s.n]
	}
	l := s.spill[len(s.spill)-1]
	s.spill = s.spill[:len(s.spill)-1]
	return l
}

func (s *levelStack) at(i int) level {
	if i < len(s.inline) {
		return s.inline[i]
	}
	return s.spill[i-len(s.inline)]
}

func (s *levelStack) clear() {
	s.n = 0
	s.spill = s.spill[:0]
}

type obsState uint8

const (
	stHead obsState = iota // at a header boundary; hlen bytes of a split header wait in hbuf
	stSkip                 // counting a skipped value down to end
	stTake                 // assembling a taken value that straddles chunks, up to end
)

const topEnd = math.MaxUint64

// Observer is an incremental decoder that pulls subscribed key paths out of a stream of
// packets. One observer serves a whole byte stream: any number of top-level packets in a
// row, fed in chunks of any size. A one-shot decode is the same machine fed everything at
// once and then finished.
//
// An Observer is not safe for concurrent use. Do not copy a non-zero Observer.
type Observer struct {
	cfg      Config
	paths    []Path
	one      onePath // the single path of Get, copied: the observer stays on Get's stack
	all      uint64
	validate bool

	cur   level
	stack levelStack
	state obsState
	end   uint64 // stSkip / stTake: stream offset where the value ends
	sub   int    // stTake
	tag   Tag    // stTake
	pos   uint64 // stream offset of the first byte of the next input
	hbuf  [maxHeaderLen]byte
	hlen  int

	asm      []byte
	clearAsm bool
	general  bool // the fast path off (tests: the reference it is compared against)
	started  uint64
	err      error
	out      Observed
}

// NewObserver returns an observer of the given key paths in the given config.
//
// Errors (Op OpPath): path_count for no paths or more than MaxSubscriptions, empty_path,
// path_too_deep, path_overlap when one path is a prefix of (or equal to) another.
func NewObserver(c Config, paths ...Path) (*Observer, error) {
	if len(paths) == 0 || len(paths) > MaxSubscriptions {
		return nil, &Error{Kind: KindPathCount, Op: OpPath, Count: uint64(len(paths)), Max: MaxSubscriptions}
	}
	stored := make([]Path, len(paths))
	for i, p := range paths {
		if len(p) == 0 {
			return nil, &Error{Kind: KindEmptyPath, Op: OpPath}
		}
		if len(p) > MaxPathDepth {
			return nil, &Error{Kind: KindPathTooDeep, Op: OpPath, Len: uint64(len(p)), Max: MaxPathDepth}
		}
		for j, other := range paths[:i] {
			shorter, longer := j, i
			if len(other) > len(p) {
				shorter, longer = i, j
			}
			if hasPrefix(paths[longer], paths[shorter]) {
				return nil, &Error{Kind: KindPathOverlap, Op: OpPath, Shorter: shorter, Longer: longer}
			}
		}
		stored[i] = append(Path(nil), p...)
	}
	o := &Observer{}
	o.init(c, stored, false)
	return o, nil
}

func hasPrefix(p, prefix Path) bool {
	if len(prefix) > len(p) {
		return false
	}
	for i, id := range prefix {
		if p[i] != id {
			return false
		}
	}
	return true
}

// NewValidator returns an observer with no subscriptions that only checks well-formedness:
// it enters every node so that every header is checked against its node and the depth
// limit. In Draft02, where the wire does not mark nodes, only top-level headers are checked.
func NewValidator(c Config) *Observer {
	o := &Observer{}
	o.init(c, nil, true)
	return o
}

// Validating makes the observer also enter every node that no path needs, so that every
// header in the stream is checked (slower: every TLV is visited). Call it before feeding.
func (o *Observer) Validating(v bool) *Observer {
	o.validate = v
	return o
}

func (o *Observer) init(c Config, paths []Path, validate bool) {
	o.cfg = c.norm()
	o.paths = paths
	o.validate = validate
	n := len(paths)
	if paths == nil && o.one.n > 0 {
		n = 1
	}
	if n == 64 {
		o.all = math.MaxUint64
	} else {
		o.all = 1<<uint(n) - 1
	}
	o.Reset()
}

// onePath holds one key path inline.
type onePath struct {
	ids [MaxPathDepth]uint32
	n   int
}

func (o *Observer) path(i int) Path {
	if o.paths == nil {
		return o.one.ids[:o.one.n]
	}
	return o.paths[i]
}

// wantAt is the set of one-byte ids that continue an active path at depth.
func (o *Observer) wantAt(active uint64, depth int) uint64 {
	var want uint64
	for ; active != 0; active &= active - 1 {
		p := o.path(bits.TrailingZeros64(active))
		if id := p[depth]; id < 64 {
			want |= 1 << id
		}
	}
	return want
}

// Reset forgets all stream state (and a sticky error), keeping the subscriptions and
// buffers, so that one observer serves many independent decodes without allocating.
func (o *Observer) Reset() {
	o.cur = level{end: topEnd, active: o.all, want: o.wantAt(o.all, 0)}
	o.stack.clear()
	o.state = stHead
	o.pos = 0
	o.hlen = 0
	o.asm = o.asm[:0]
	o.clearAsm = false
	o.started = 0
	o.err = nil
}

// Config is the dialect and limits in use.
func (o *Observer) Config() Config { return o.cfg }

// Position is the number of bytes consumed since creation or the last Reset.
func (o *Observer) Position() uint64 { return o.pos }

// Packets is the number of top-level packets completed so far.
func (o *Observer) Packets() uint64 {
	if o.atBoundary() || o.started == 0 {
		return o.started
	}
	return o.started - 1
}

func (o *Observer) atBoundary() bool {
	return o.state == stHead && o.hlen == 0 && o.stack.n == 0
}

// Feed consumes input until a subscribed value completes or the input runs out.
//
// It returns how many bytes were consumed and the completed value, if any; call again with
// in[consumed:]. A nil value with everything consumed means "feed more": running out of
// input is never an error here (see Finish). The value and its bytes are valid until the
// next call on the observer.
//
// Errors are header errors (negative_length, too_long, child_overflow, truncated_header,
// invalid_tag, varint_overflow, too_deep). They are sticky: every later Feed and Finish
// returns the same error until Reset.
func (o *Observer) Feed(in []byte) (consumed int, v *Observed, err error) {
	n, found, err := o.feed(in)
	if found {
		return n, &o.out, nil
	}
	return n, nil, err
}

// FeedAll feeds all of in, calling fn for every value that completes. An error from fn stops
// the feed and is returned as is.
func (o *Observer) FeedAll(in []byte, fn func(*Observed) error) error {
	for {
		n, found, err := o.feed(in)
		if err != nil {
			return err
		}
		if !found {
			return nil
		}
		if err := fn(&o.out); err != nil {
			return err
		}
		in = in[n:]
	}
}

// Finish declares the end of the stream. A stream that ends between top-level packets is
// complete; one that stopped inside a packet (a header, a value or a node) is unexpected_end
// with the bytes still missing from the outermost open packet.
func (o *Observer) Finish() error {
	if o.err != nil {
		return o.err
	}
	if o.atBoundary() {
		return nil
	}
	// The outermost open packet ends last; everything inside it ends no later.
	var end uint64
	switch {
	case o.stack.n >= 2:
		end = o.stack.at(1).end
	case o.stack.n == 1:
		end = o.cur.end
	case o.state != stHead:
		end = o.end
	default:
		end = o.pos + 1
	}
	needed := uint64(1)
	if end > o.pos && end-o.pos > 1 {
		needed = end - o.pos
	}
	return errUnexpectedEnd(needed)
}

// ObserveReader reads r to its end, calling fn with every value at one of paths (Golang
// dialect). See Config.ObserveReader.
func ObserveReader(r io.Reader, paths []Path, fn func(Observed) error) error {
	return DefaultConfig.ObserveReader(r, paths, fn)
}

// ObserveReader reads r to its end through a new observer of paths, calling fn with every
// value that completes (borrowed: copy what must outlive the call). It returns the first
// error of the observer, of fn or of r, or unexpected_end when r ends inside a packet.
func (c Config) ObserveReader(r io.Reader, paths []Path, fn func(Observed) error) error {
	o, err := NewObserver(c, paths...)
	if err != nil {
		return err
	}
	return o.ObserveReader(r, fn)
}

// ObserveReader feeds r to the observer until io.EOF, then finishes it.
func (o *Observer) ObserveReader(r io.Reader, fn func(Observed) error) error {
	buf := make([]byte, 32<<10)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := o.FeedAll(buf[:n], func(v *Observed) error { return fn(*v) }); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return o.Finish()
		}
		if rerr != nil {
			return rerr
		}
	}
}

type action uint8

const (
	actSkip action = iota
	actEnter
	actTake
)

// feed is Feed without the pointer, so that one-shot callers keep the observer on the stack.
func (o *Observer) feed(in []byte) (int, bool, error) {
	if o.err != nil {
		return 0, false, o.err
	}
	n, found, err := o.step(in)
	if err != nil {
		o.err = err
	}
	return n, found, err
}

func (o *Observer) step(in []byte) (int, bool, error) {
	if o.clearAsm {
		o.asm = o.asm[:0]
		o.clearAsm = false
	}
	if o.all == 1 && !o.validate && !o.general && o.cfg.Dialect != Draft02 &&
		o.state == stHead && o.hlen == 0 && o.stack.n == 0 {
		if n, found, ok := o.stepFast(in); ok {
			return n, found, nil
		}
	}
	fast := o.cfg.Dialect != Draft02
	off := 0
	for {
		switch o.state {
		case stHead:
			var h header
			var start uint64
			if o.hlen == 0 {
				if fast {
					off = o.scan(in, off)
				}
				rest := in[off:]
				if len(rest) == 0 {
					o.pos += uint64(off)
					return off, false, nil
				}
				start = o.pos + uint64(off)
				var ok bool
				var err error
				h, ok, err = o.header(rest, fast)
				if err != nil {
					return off, false, o.canonicalError(start, rest, err)
				}
				if !ok {
					if err := o.checkPartialHeader(start, len(rest)); err != nil {
						return off, false, err
					}
					o.hlen = copy(o.hbuf[:], rest)
					o.pos += uint64(len(in))
					return len(in), false, nil
				}
				off += h.headLen
			} else {
				start = o.pos + uint64(off) - uint64(o.hlen)
				n := min(maxHeaderLen-o.hlen, len(in)-off)
				copy(o.hbuf[o.hlen:], in[off:off+n])
				buf := o.hbuf[:o.hlen+n]
				var ok bool
				var err error
				h, ok, err = parseHeader(buf, &o.cfg)
				if err != nil {
					return off, false, o.canonicalError(start, buf, err)
				}
				if !ok {
					if err := o.checkPartialHeader(start, len(buf)); err != nil {
						return off, false, err
					}
					o.hlen += n
					off += n
					o.pos += uint64(off)
					return off, false, nil
				}
				off += h.headLen - o.hlen
				o.hlen = 0
			}
			// off now points at the value; start is the header's stream offset.
			bodyEnd, err := o.checkBounds(start, &h)
			if err != nil {
				return off, false, err
			}
			act, sub, active := o.decide(&h)
			switch act {
			case actSkip:
				if h.len <= uint64(len(in)-off) {
					off += int(h.len)
					o.afterValue(o.pos + uint64(off))
				} else {
					off = len(in)
					o.state = stSkip
					o.end = bodyEnd
				}
			case actEnter:
				if err := o.enter(bodyEnd, active); err != nil {
					return off, false, err
				}
				o.afterValue(o.pos + uint64(off))
			case actTake:
				n := int(h.len) // at most MaxInt32
				if n <= len(in)-off {
					value := in[off : off+n : off+n]
					depth := uint32(o.stack.n) + 1
					off += n
					o.afterValue(o.pos + uint64(off))
					o.pos += uint64(off)
					o.setOut(value, h.tag, depth, h.headLen, sub, false)
					return off, true, nil
				}
				// Straddles chunks: keep what arrived, never reserving from the wire length
				// (bounded by MaxPacketLen, but the bytes may never come).
				o.asm = append(o.asm[:0], in[off:]...)
				off = len(in)
				o.state = stTake
				o.end = bodyEnd
				o.sub = sub
				o.tag = h.tag
			}
		case stSkip:
			left := o.end - (o.pos + uint64(off))
			if left > uint64(len(in)-off) {
				o.pos += uint64(len(in))
				return len(in), false, nil
			}
			off += int(left)
			o.state = stHead
			o.afterValue(o.end)
		case stTake:
			left := o.end - (o.pos + uint64(off))
			if left > uint64(len(in)-off) {
				o.asm = append(o.asm, in[off:]...)
				o.pos += uint64(len(in))
				return len(in), false, nil
			}
			depth := uint32(o.stack.n) + 1
			o.state = stHead
			o.afterValue(o.end)
			if len(o.asm) == 0 {
				// None of the value came before (its header ended the previous chunk): it
				// lies in this chunk and is lent from it, as the Rust observer lends it.
				value := in[off : off+int(left) : off+int(left)]
				off += int(left)
				o.pos += uint64(off)
				o.setOut(value, o.tag, depth, headerLen(o.tag, len(value), o.cfg.Dialect), o.sub, false)
				return off, true, nil
			}
			o.asm = append(o.asm, in[off:off+int(left)]...)
			off += int(left)
			o.pos += uint64(off)
			o.clearAsm = true
			hl := headerLen(o.tag, len(o.asm), o.cfg.Dialect)
			o.setOut(o.asm[:len(o.asm):len(o.asm)], o.tag, depth, hl, o.sub, true)
			return off, true, nil
		}
	}
}

// header is parseHeader with the short headers of the one-byte dialects read first
// (shortAt).
func (o *Observer) header(b []byte, fast bool) (header, bool, error) {
	if fast {
		if tag, n, hl, ok := shortAt(b, 0); ok && !byteInvalid(tag) && uint64(n) <= o.cfg.Limits.MaxPacketLen {
			return header{tag: byteTag(tag), len: uint64(n), headLen: hl}, true, nil
		}
	}
	return parseHeader(b, &o.cfg)
}

// stepFast is fastWalk from a top-level boundary, committing its answer to the state the
// general walk would have reached; ok is false (nothing changed) when it bails.
func (o *Observer) stepFast(in []byte) (consumed int, found, ok bool) {
	var ends [MaxPathDepth]int
	got, start, n, hl, depth, tag, packets := fastWalk(o.path(0), &o.cfg, in, &ends)
	switch got {
	case fastDone:
		o.started += packets
		o.pos += uint64(len(in))
		return len(in), false, true
	case fastFound:
		o.started += packets
		base := o.pos
		// The nodes the walk entered, as enter would have opened them: one path, so each
		// is active for subscription 0 only.
		for d := 0; d < depth-1; d++ {
			o.stack.push(o.cur)
			o.cur = level{end: base + uint64(ends[d]), active: 1, want: o.wantAt(1, d+1)}
		}
		end := start + n
		o.pos = base + uint64(end)
		o.afterValue(o.pos)
		o.setOut(in[start:end:end], byteTag(tag), uint32(depth), hl, 0, false)
		return end, true, true
	}
	return 0, false, false
}

// setOut stores the completed value field by field (a composite literal would be copied
// into the observer with a bulk write barrier).
func (o *Observer) setOut(value []byte, tag Tag, depth uint32, headLen int, sub int, assembled bool) {
	o.out.value = value
	o.out.tag = tag
	o.out.meta = packMeta(depth, headLen, o.cfg.Dialect)
	o.out.lim = o.cfg.Limits
	o.out.Sub = sub
	o.out.Assembled = assembled
}

// scan is the hot loop of the one-byte dialects: it skips, without any per-packet
// bookkeeping beyond the offset, every complete packet of the current level whose header is
// short and valid and whose key no active path wants (nor, when validating, a node), and
// closes the levels it reaches the end of. Everything else is left to the general path,
// which parses the same header again and reports its errors.
func (o *Observer) scan(in []byte, off int) int {
	if o.cfg.Limits.MaxPacketLen < 1<<13 {
		return off // the loop below accepts any one- or two-byte length
	}
	var nodeStop uint64
	if o.validate {
		nodeStop = math.MaxUint64
	}
	for {
		limit := len(in)
		top := o.stack.n == 0
		if !top {
			if e := o.cur.end - o.pos; e < uint64(limit) {
				limit = int(e)
			}
		}
		// The tag bytes that need the general path: the keys wanted here, every invalid
		// one, and every node when validating.
		want := o.cur.want
		stop := newStopSet(want, want|nodeStop)
		i, skipped := skipShort(in[:limit], off, &stop)
		off = i
		if top {
			o.started += skipped
			return off
		}
		if skipped == 0 || o.pos+uint64(off) != o.cur.end {
			return off
		}
		o.afterValue(o.cur.end)
	}
}

// checkBounds checks a header that starts at stream offset start against the current node
// and returns the stream offset where its value ends.
func (o *Observer) checkBounds(start uint64, h *header) (uint64, error) {
	head := uint64(h.headLen)
	if o.stack.n == 0 {
		o.started++
		return start + head + h.len, nil
	}
	available := o.cur.end - start
	if head > available {
		return 0, errTruncatedHeader(available)
	}
	if h.len > available-head {
		return 0, errChildOverflow(h.len, available-head)
	}
	return start + head + h.len, nil
}

// checkPartialHeader: a header split across chunks must still fit in the current node.
func (o *Observer) checkPartialHeader(start uint64, have int) error {
	if available := o.cur.end - start; uint64(have) >= available {
		return errTruncatedHeader(available)
	}
	return nil
}

// canonicalError reports a header error inside a node as the node-bounded parse sees it, so
// that the streaming walk and Packet.Children agree on every input.
func (o *Observer) canonicalError(start uint64, buf []byte, err error) error {
	available := o.cur.end - start
	if available >= uint64(len(buf)) {
		return err
	}
	if _, _, err2 := parseHeader(buf[:available], &o.cfg); err2 != nil {
		return err2
	}
	return errTruncatedHeader(available)
}

func (o *Observer) decide(h *header) (act action, sub int, enter uint64) {
	depth := o.stack.n
	id := h.tag.ID()
	var take uint64
	for active := o.cur.active; active != 0; active &= active - 1 {
		i := bits.TrailingZeros64(active)
		p := o.path(i)
		// active only holds paths longer than depth.
		if p[depth] == id {
			if len(p) == depth+1 {
				take |= 1 << uint(i)
			} else {
				enter |= 1 << uint(i)
			}
		}
	}
	if take != 0 {
		// Paths never overlap, so at most one path ends here.
		return actTake, bits.TrailingZeros64(take), 0
	}
	canEnter := !o.cfg.Dialect.HasNodeFlag() || h.tag.IsNode()
	if canEnter && (enter != 0 || (o.validate && h.tag.IsNode())) {
		return actEnter, 0, enter
	}
	return actSkip, 0, 0
}

func (o *Observer) enter(end, active uint64) error {
	// The entered packet sits at depth stack.n+1; its children one deeper.
	if uint64(o.stack.n)+1 >= uint64(o.cfg.Limits.MaxDepth) {
		return errTooDeep(o.cfg.Limits.MaxDepth)
	}
	o.stack.push(o.cur)
	o.cur = level{end: end, active: active}
	if active != 0 {
		o.cur.want = o.wantAt(active, o.stack.n)
	}
	return nil
}

// afterValue closes every node that ends at stream offset at.
func (o *Observer) afterValue(at uint64) {
	for o.cur.end == at && o.stack.n > 0 {
		o.cur = o.stack.pop()
	}
}
