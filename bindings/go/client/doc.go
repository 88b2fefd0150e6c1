// Package client connects Go programs to a Y3 router (`y3 serve`, crates/y3-router) as
// sources, stream functions and sinks, so that Go functions can join a pipeline:
//
//	Source ──data 0x10──▶ router ──0x10──▶ StreamFunction ──data 0x20──▶ router ──▶ Sink
//
// Every client connects with Options (name, token, TLS, backoff), sends a handshake with
// its role and observed tags, and waits for the router's accepted frame. Outgoing frames
// are encoded at once and queued for a writer goroutine that feeds every queued frame into
// one bufio.Writer and flushes when the queue runs empty, so a fast sender gets batched
// writes and a slow one low latency. Incoming bytes go through a FrameReader that reads as
// much as the socket has and decodes every complete frame from its buffer, refusing an
// oversized declared length before buffering any of it.
//
// Lost connections are re-established with exponential Backoff; refusals (a wrong token, a
// bad handshake, an untrusted certificate) are returned at once as *Error values whose
// Kind is the Rust transport's snake_case name (unauthorized, shutting_down, gave_up, ...).
//
// Transports: TCP, TLS 1.3 over TCP (Options.TLS), and QUIC through the quicdial
// subpackage (quic-go), which this package does not import.
//
// The frame format (spec/frames.md) is implemented here too, byte-identical with
// crates/y3-transport: AppendFrame, DecodeFrame, FrameReader, and the frame types
// Handshake, Accepted, Data, Goaway, Ping and Pong.
package client
