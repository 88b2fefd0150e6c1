package y3

import "math"

// The one walker of complete buffers over the header grammar of tag.go, the port of
// crates/y3/src/walker.rs: what it looks for is its type parameter (a wanter), compiled
// once per instantiation:
//
//	walk[nothing]   whole-buffer validation (Validate, Decode): every node entered
//
//	per header:   skip run (skipShort) over what needs no decision
//	              short header (shortAt: invalid tag, limit), inside its node
//	              wanter.at: skip or answer;  wanter.validate: into every node (depth limit)
//	per node end: back to the enclosing node (its end kept in ends)
//
// One path (Get, the observer's fast feed) is fastWalk: the same loop written out for one
// path, as in the Rust codec. The walk never decides anything the Observer would decide
// differently: anything it does not answer (an error, a longer length, a value past the
// input, Draft02) makes it give up (fastBail) before its caller has changed any state, and
// the general machine walks the same bytes from the start. TestWalkerValidationAgrees and
// FuzzDecode compare the two.

// wanter is what a walk looks for.
type wanter interface {
	// stops is the skip run's stop set at nesting depth (0: the top level).
	stops(depth int) *stopSet
	// at decides at the short header with tag byte tag and value in[start:start+n], at
	// nesting depth: true ends the walk (fastFound).
	at(tag byte, start, n, depth int) bool
	// validate reports whether the walk enters every node, checking every header in it.
	validate() bool
}

// walk walks in[:top] (a run of whole siblings: top-level packets, or one node's children)
// for w, entering nodes as w decides up to maxDepth levels (and len(ends)), under c's
// length limit (c normalized, in a one-byte-tag dialect). ends[:depth] holds the ends of the
// nodes entered, outermost first. packets counts the top-level packets begun.
func walk[W wanter](w W, in []byte, top int, c *Config, maxDepth int, ends []int) (got fastOutcome, packets uint64) {
	limit := c.Limits.MaxPacketLen
	// skipShort takes one- and two-group lengths without comparing them with the limit.
	run := limit >= 1<<13
	depth, end, off := 0, top, 0
	// The mode, asked once (a method of a type parameter is an indirect call in Go) and the
	// stop set once per level.
	validate, stop := w.validate(), w.stops(0)
	for {
		if run {
			i, skipped := skipShort(in[:end], off, stop)
			off = i
			if depth == 0 {
				packets += skipped
			}
		}
		if off == end {
			if depth == 0 {
				return fastDone, packets
			}
			// The node ended: go on with its next sibling, as the observer does.
			depth--
			if depth == 0 {
				end = top
			} else {
				end = ends[depth-1]
			}
			stop = w.stops(depth)
			continue
		}
		// A short header inside the current node (shortAt), a valid tag byte, a length
		// within the limit; anything else (invalid_tag, too_long, child_overflow, or more
		// input needed) is the observer's.
		tag, n, hl, short := shortAt(in[:end], off)
		if !short || byteInvalid(tag) || uint64(n) > limit {
			return fastBail, 0
		}
		start := off + hl
		next := start + n
		if next > end {
			return fastBail, 0
		}
		if depth == 0 {
			packets++
		}
		if w.at(tag, start, n, depth) {
			return fastFound, packets
		}
		if validate && byteNode(tag) {
			// The observer refuses to enter a node at the depth limit.
			if depth+1 >= maxDepth || depth >= len(ends) {
				return fastBail, 0
			}
			ends[depth] = next
			depth++
			end = next
			off = start
			stop = w.stops(depth)
			continue
		}
		off = next
	}
}

// nothing looks for nothing and enters every node: validation.
type nothing struct{}

// stopNodes is the stop set of a validating walk with nothing to look for: every node and
// every invalid tag byte.
var stopNodes = newStopSet(0, math.MaxUint64)

func (nothing) stops(int) *stopSet          { return &stopNodes }
func (nothing) at(byte, int, int, int) bool { return false }
func (nothing) validate() bool              { return true }

// validateDepth is the nesting walkValidate follows before it leaves the rest to the
// observer.
const validateDepth = 16

// walkValidate validates in (a run of whole top-level packets, or one node's children under
// depthLeft more levels) by the one walker: true when every header is valid; false (nothing
// decided, an error included) leaves it to the observer. c must be normalized.
func walkValidate(c *Config, in []byte, depthLeft int) bool {
	if !c.Dialect.HasNodeFlag() {
		return false
	}
	var ends [validateDepth]int
	got, _ := walk(nothing{}, in, len(in), c, min(int(c.Limits.MaxDepth), depthLeft), ends[:])
	return got == fastDone
}
