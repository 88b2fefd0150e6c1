// Package harness starts the router under test for the interoperability tests: a real YoMo
// zipper in-process ([YoMo]) or the y3 router as a subprocess ([Y3], binary from $Y3_BIN),
// and the YoMo clients that talk to it, each with a time bound and a cleanup.
//
// A test is written once against [Router] and run for every [Kind]; a router of either kind
// can stand on either side of a mesh ([Options.Mesh]).
package harness
