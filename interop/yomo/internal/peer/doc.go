// Package peer drives YoMo's own software — github.com/yomorun/yomo v1.22.0 sources, stream
// functions and zipper — for y3's interoperability tests and benchmark lab.
//
// Everything that touches the network is YoMo's code: [ConnectSource] wraps yomo.NewSource,
// [ConnectSink] and [ConnectRelay] wrap yomo.NewStreamFunction, and [StartZipper] runs YoMo's
// core server the way `yomo serve` does. This package adds only what a test or a benchmark
// needs around them: stamped payloads (a sequence number and a send time), counting,
// latency percentiles, and time bounds on the YoMo calls that can block forever.
//
// It is not a YoMo re-implementation: no frame is encoded or decoded here.
package peer
