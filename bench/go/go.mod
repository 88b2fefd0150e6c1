module github.com/y3-dev/y3/bench/go

go 1.23

require (
	github.com/buger/jsonparser v1.1.1
	github.com/tidwall/gjson v1.18.0
	github.com/yomorun/y3-codec-golang v1.7.3
	golang.org/x/sys v0.30.0
)

require (
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.0 // indirect
)
