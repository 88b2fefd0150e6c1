package y3

import (
	"math/rand"
	"testing"
)

// validationAgrees checks that Validate and Decode (the one walker first) answer exactly as
// the observer alone does on buf, in every dialect and under tight limits.
func validationAgrees(t *testing.T, buf []byte) {
	t.Helper()
	for _, d := range []Dialect{Golang, NVarInt, Draft02} {
		for _, lim := range []Limits{{}, {MaxPacketLen: 1 << 12, MaxDepth: 8}, {MaxDepth: 2}} {
			c := Config{Dialect: d, Limits: lim}
			got, want := c.Validate(buf), c.validateGeneral(buf)
			if !sameErr(got, want) {
				t.Fatalf("%v %+v Validate(%x) = %v, the observer says %v", d, lim, buf, got, want)
			}
			p, rest, err := c.Parse(buf)
			if err != nil || len(rest) != 0 {
				continue
			}
			n := c.norm()
			if !p.IsNode() || !n.Dialect.HasNodeFlag() {
				continue
			}
			got, want = validateValue(c, p.tag, p.value), validateValueGeneral(n, p.tag, p.value)
			if !sameErr(got, want) {
				t.Fatalf("%v %+v validateValue(%x) = %v, the observer says %v", d, lim, buf, got, want)
			}
		}
	}
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error() && KindOf(a) == KindOf(b)
}

// TestWalkerValidationAgrees: the vectors, the malformed inputs, deep nesting, and random
// mutations and truncations of them, validated by the walker and by the observer alone.
func TestWalkerValidationAgrees(t *testing.T) {
	var inputs [][]byte
	for _, v := range loadVectors(t) {
		if v.Hex != "" && len(v.Hex) <= 8192 {
			inputs = append(inputs, v.bytes(t))
		}
	}
	for _, m := range loadMalformed(t) {
		inputs = append(inputs, mustHex(t, m.InputHex))
	}
	inputs = append(inputs, nested(3), nested(9), nested(20), nested(100))
	rng := rand.New(rand.NewSource(30))
	n := len(inputs)
	for i := 0; i < 20000; i++ {
		src := inputs[rng.Intn(n)]
		buf := append([]byte(nil), src...)
		// Two whole inputs in a row (a stream), then a few edits, then maybe a cut.
		if rng.Intn(3) == 0 {
			buf = append(buf, inputs[rng.Intn(n)]...)
		}
		for e := rng.Intn(3); e > 0 && len(buf) > 0; e-- {
			buf[rng.Intn(len(buf))] = byte(rng.Intn(256))
		}
		if rng.Intn(4) == 0 && len(buf) > 0 {
			buf = buf[:rng.Intn(len(buf)+1)]
		}
		inputs = append(inputs, buf)
	}
	accepted, def := 0, DefaultConfig.norm()
	for _, buf := range inputs {
		validationAgrees(t, buf)
		if walkValidate(&def, buf, 1<<30) {
			accepted++
		}
	}
	t.Logf("the walker answered %d of %d inputs", accepted, len(inputs))
	// The walker answers most valid streams itself (else this compares the observer with
	// itself).
	if accepted < 100 {
		t.Fatalf("the walker answered only %d inputs", accepted)
	}
}
