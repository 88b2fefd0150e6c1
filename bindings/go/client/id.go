package client

import (
	"crypto/rand"
	"strconv"
	"sync/atomic"
)

// idAlphabet is nanoid's: 64 URL-safe characters, so every random byte's low six bits pick
// one without bias.
const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

// IDLen is the length of client ids and transaction ids, as YoMo's nanoids.
const IDLen = 21

// NewID returns a fresh random id of IDLen characters of [A-Za-z0-9_-], as YoMo's client
// ids and transaction ids (yomo-tid).
func NewID() string {
	var b [IDLen]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	for i, c := range b {
		b[i] = idAlphabet[c&63]
	}
	return string(b[:])
}

// clientID is a client's identity across reconnections: the handshake's id is the base id
// and a reconnect counter, "<base>-0", "<base>-1", ...; data frames a source writes carry
// the base id alone as yomo-source-id.
type clientID struct {
	base    string
	counter atomic.Uint64
}

func newClientID() *clientID { return &clientID{base: NewID()} }

// next is the id of the next connection attempt.
func (c *clientID) next() string {
	return c.base + "-" + strconv.FormatUint(c.counter.Add(1)-1, 10)
}
