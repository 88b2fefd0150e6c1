// Package client connects Go programs to a y3 router (`y3 serve`, crates/y3-router) or to
// a YoMo v1.22 zipper as sources, stream functions and sinks, speaking YoMo's wire
// protocol with y3's extension fields (spec/frames.md):
//
//	Source ──data 0x10──▶ router ──0x10──▶ StreamFunction ──data 0x20──▶ router ──▶ Sink
//
// Every client connects with Options (name, credential, TLS, backoff), sends a handshake
// with its client type, a YoMo-style id ("<21-char id>-<reconnect counter>") and its
// observed tags, and waits for the router's handshake ack. Outgoing frames are encoded at
// once and queued for a writer goroutine that feeds every queued frame into one
// bufio.Writer and flushes when the queue runs empty, so a fast sender gets batched writes
// and a slow one low latency. Incoming bytes go through a FrameReader that reads as much as
// the socket has and decodes every complete frame from its buffer, refusing an oversized
// declared length before buffering any of it.
//
// Data frames carry a msgpack metadata map: sources write yomo-source-id and a fresh
// yomo-tid, stream functions keep their input's map (minus yomo-target) on their outputs.
// A stream function's Handler returns at most one output per input; a WriterHandler
// (ServeWriter, RunStreamFunctionWriter) gets a Writer and may write any number, and to a
// target, as YoMo's ctx.Write and ctx.WriteWithTarget do.
//
// Delivery to the router is at most once, as in YoMo. Against y3 serve, a DurableSource
// (ConnectDurableSource) and a durable StreamFunction (ConnectDurableStreamFunction) ask
// for stored acknowledgements (spec/frames.md), keep what they wrote until the router has
// stored it, and write it again, with the same yomo-tid, after a reconnect: at least once
// across a router killed mid-stream. Both reconnect and write again by themselves, with no
// further call (a DurableSource's goroutine, its keeper, stops at Close). A frame the
// router refuses by its rules (over its frame limit, past its hop limit, a loop) is
// reported with its reason (Refused, Refusals) and not written again; one nobody took (no
// subscriber yet: no_subscriber) is kept and written again with backoff (RetryFirst
// doubling to RetryMax) until a subscriber takes it (Retried).
//
// Lost connections (a stream that ends, even inside a frame, as when the router's process
// is killed partway through a write; on the handshake or mid-stream) are re-established
// with exponential Backoff, forever by default (a client outlives a router restart);
// Error.Retryable says which failures are lost connections. Refusals (a rejected
// handshake, a goaway or QUIC close whose code is not retryable, an untrusted certificate)
// are returned at once as *Error values whose Kind is the stable snake_case name shared
// with Rust and Python (unauthorized, rejected, shutting_down, gave_up, ...).
//
// Transports: TCP, TLS 1.3 over TCP (Options.TLS), and QUIC through the quicdial
// subpackage (quic-go), which this package does not import. A YoMo zipper speaks QUIC
// only.
//
// The frames are implemented here too: AppendFrame, DecodeFrame, FrameReader, the frame
// types Handshake, HandshakeAck, Rejected, Goaway, ConnectTo and Data, and the metadata
// codec (AppendMetadata, DecodeMetadata). They reproduce YoMo's own frames
// (testdata/yomo-v1.22) byte for byte.
package client
