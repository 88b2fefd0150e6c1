module github.com/y3-dev/y3/bindings/go/client

go 1.24

require (
	github.com/quic-go/quic-go v0.59.0
	github.com/y3-dev/y3/bindings/go v0.1.0
)

require (
	golang.org/x/crypto v0.41.0 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
)

// The codec module beside this one (same repository), for work inside the repository.
// Consumers ignore this line: they get the codec at the version required above, tagged
// bindings/go/vX.Y.Z (scripts/test-packages.sh proves it through a module proxy).
replace github.com/y3-dev/y3/bindings/go => ../
