module github.com/y3-dev/y3/bindings/go

go 1.24
