package y3

// The complete-buffer fast path for one key path, the port of crates/y3/src/fast.rs: the
// common case of whole packets in one slice, one-byte tags and one- or two-byte lengths,
// walked in a single tight loop.
//
// It never decides anything the Observer would decide differently: every check the observer
// makes on these headers is made here too (tag byte, length limit, depth limit, every value
// inside its node and inside the input), and anything else (an error, a longer length, a
// value that runs past the input, Draft02) makes it give up (fastBail) before any state has
// changed, so that the general machine walks the same bytes from the same place and reports
// exactly what it always reports. TestFastPathAgrees and the fuzz targets compare the two.

type fastOutcome uint8

const (
	fastBail  fastOutcome = iota // leave it to the observer
	fastFound                    // the path's value
	fastDone                     // a run of complete top-level packets without the path
)

// fastWalk walks in (a stream position between top-level packets) for key path ids
// (1..MaxPathDepth keys). c must be normalized and in a one-byte-tag dialect.
//
// For fastFound, the value is in[start:start+n], with tag byte tag, a header of hl bytes
// and depth depth (1 for a top-level packet); ends[:depth-1] are the offsets where the
// enclosing nodes end, outermost first. packets counts the top-level packets begun (for
// fastDone, walked). The results are separate values, not a struct: they come back in
// registers, where a struct result is stored and reloaded with other widths (a
// store-forwarding stall that cost a third of a small Get).
func fastWalk(ids []uint32, c *Config, in []byte, ends *[MaxPathDepth]int) (got fastOutcome, start, n, hl, depth int, tag byte, packets uint64) {
	limit := c.Limits.MaxPacketLen
	if limit < 1<<13 {
		return fastBail, 0, 0, 0, 0, 0, 0 // the skip run accepts any one- or two-byte length
	}
	maxDepth := int(c.Limits.MaxDepth)
	last := len(ids) - 1
	want := ids[0]
	end := len(in)
	off := 0
	for {
		// The skip run: complete packets of this node whose key is not the wanted one. A
		// header it does not skip is looked at below.
		i, skipped := skipRun(in[:end], off, want)
		off = i
		if depth == 0 {
			packets += skipped
		}
		if off == end {
			if depth == 0 {
				return fastDone, 0, 0, 0, 0, 0, packets
			}
			// The node ended without the path's value: go on with its next sibling, as the
			// observer does (a later sibling with the same key may hold it).
			depth--
			want = ids[depth]
			if depth == 0 {
				end = len(in)
			} else {
				end = ends[depth-1]
			}
			continue
		}
		// A short header inside the current node (shortAt), a valid tag byte, a length
		// within the limit; anything else (invalid_tag, too_long, child_overflow, or more
		// input needed) is the observer's.
		var short bool
		tag, n, hl, short = shortAt(in[:end], off)
		if !short || byteInvalid(tag) || uint64(n) > limit {
			return fastBail, 0, 0, 0, 0, 0, 0
		}
		start = off + hl
		next := start + n
		if next > end {
			return fastBail, 0, 0, 0, 0, 0, 0
		}
		if depth == 0 {
			packets++
		}
		if byteKey(tag) == want {
			if depth == last {
				return fastFound, start, n, hl, depth + 1, tag, packets
			}
			if byteNode(tag) {
				// The observer refuses to enter a node at the depth limit.
				if depth+1 >= maxDepth {
					return fastBail, 0, 0, 0, 0, 0, 0
				}
				ends[depth] = next
				depth++
				want = ids[depth]
				end = next
				off = start
				continue
			}
		}
		off = next
	}
}

// skipRun skips, from b[i:], every complete packet with a valid one-byte tag whose key is
// not want and whose header is short (skipShort with a stop set of want alone).
func skipRun(b []byte, i int, want uint32) (int, uint64) {
	w := keyBit(want)
	stop := newStopSet(w, w)
	return skipShort(b, i, &stop)
}
