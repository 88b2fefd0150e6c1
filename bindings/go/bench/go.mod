module github.com/y3-dev/y3/bindings/go/bench

go 1.24

require (
	github.com/tidwall/gjson v1.20.1
	github.com/y3-dev/y3/bindings/go v0.1.0
	github.com/yomorun/y3-codec-golang v1.7.3
)

require (
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
)

replace github.com/y3-dev/y3/bindings/go => ../
