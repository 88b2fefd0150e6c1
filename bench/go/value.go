package main

import (
	"fmt"
	"math"
	"strconv"
)

// value is one extracted value. kind is the data set's type name ("string", "int32",
// "uint32", "int64", "uint64", "float32", "float64"), or "number" for a JSON number that
// was only available as a float64 (the report's map[string]interface{} method).
type value struct {
	kind string
	s    string
	i    int64
	u    uint64
	f    float64
}

var missing = value{kind: "missing"}

// parseExpected reads the expected value the lab wrote into the data file.
func parseExpected(kind, text string) (value, error) {
	v := value{kind: kind}
	var err error
	switch kind {
	case "string":
		v.s = text
	case "int32", "int64":
		v.i, err = strconv.ParseInt(text, 10, 64)
	case "uint32", "uint64":
		v.u, err = strconv.ParseUint(text, 10, 64)
	case "float32", "float64":
		v.f, err = strconv.ParseFloat(text, 64)
	default:
		err = fmt.Errorf("unknown type %q", kind)
	}
	return v, err
}

// asFloat is the value as a float64, for comparing JSON numbers decoded into interface{}.
func (v value) asFloat() float64 {
	switch v.kind {
	case "int32", "int64":
		return float64(v.i)
	case "uint32", "uint64":
		return float64(v.u)
	case "float32", "float64", "number":
		return v.f
	}
	return math.NaN()
}

// equal reports whether got (an extraction) matches want (the expected value).
func (want value) equal(got value) bool {
	if got.kind == "number" {
		return want.kind != "string" && want.asFloat() == got.f
	}
	if got.kind != want.kind {
		return false
	}
	switch want.kind {
	case "string":
		return got.s == want.s
	case "int32", "int64":
		return got.i == want.i
	case "uint32", "uint64":
		return got.u == want.u
	case "float32", "float64":
		return got.f == want.f
	}
	return false
}

func (v value) String() string {
	switch v.kind {
	case "string":
		return fmt.Sprintf("string %q", v.s)
	case "int32", "int64":
		return fmt.Sprintf("%s %d", v.kind, v.i)
	case "uint32", "uint64":
		return fmt.Sprintf("%s %d", v.kind, v.u)
	}
	return fmt.Sprintf("%s %g", v.kind, v.f)
}
