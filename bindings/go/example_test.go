package y3_test

import (
	"bytes"
	"errors"
	"fmt"

	y3 "github.com/y3-dev/y3/bindings/go"
)

func ExampleGet() {
	// NoiseData{Noise: 40 (0x11), Time: 1600000000000 (0x12), From: "127.0.0.1" (0x13)} under 0x10.
	buf := []byte{0x90, 0x17, 0x11, 0x02, 0x42, 0x20, 0x12, 0x06, 0xae, 0xc8, 0xbb, 0xba, 0x80, 0x00,
		0x13, 0x09, '1', '2', '7', '.', '0', '.', '0', '.', '1'}
	p, ok, err := y3.Get(buf, 0x10, 0x11)
	if err != nil || !ok {
		panic(err)
	}
	noise, err := p.Float32()
	fmt.Println(noise, err)
	// Output: 40 <nil>
}

func ExampleDecode() {
	// Node 0x10 { int32 0x11 = 1, string 0x12 = "a" }
	p, err := y3.Decode([]byte{0x90, 0x06, 0x11, 0x01, 0x01, 0x12, 0x01, 0x61})
	if err != nil {
		panic(err)
	}
	for c, err := range p.Children() {
		if err != nil {
			panic(err)
		}
		fmt.Println(c.Tag())
	}
	_, err = y3.Decode([]byte{0x11, 0x01, 0x05, 0xff})
	fmt.Println(y3.KindOf(err), errors.Is(err, y3.ErrTrailingBytes))
	// Output:
	// primitive 0x11
	// primitive 0x12
	// trailing_bytes true
}

func ExampleObserver() {
	// Node 0x10 { float32 0x11 = 1.5, int64 0x12 = -1 }, twice, arriving in 5-byte chunks:
	// the first value straddles two chunks (assembled), the second lies in one (lent).
	packet := []byte{0x90, 0x07, 0x11, 0x02, 0x3f, 0xc0, 0x12, 0x01, 0x7f}
	stream := append(append([]byte(nil), packet...), packet...)
	o, err := y3.NewObserver(y3.DefaultConfig, y3.Path{0x10, 0x11})
	if err != nil {
		panic(err)
	}
	for len(stream) > 0 {
		chunk := stream[:min(5, len(stream))]
		stream = stream[len(chunk):]
		for len(chunk) > 0 {
			n, v, err := o.Feed(chunk)
			if err != nil {
				panic(err)
			}
			if v != nil {
				f, _ := v.Float32()
				fmt.Println(f, v.Assembled)
			}
			chunk = chunk[n:]
		}
	}
	fmt.Println(o.Finish(), o.Packets())
	// Output:
	// 1.5 true
	// 1.5 false
	// <nil> 2
}

func ExampleObserveReader() {
	buf := []byte{0x90, 0x06, 0x11, 0x01, 0x01, 0x12, 0x01, 0x61}
	path, _ := y3.ParsePath("0x10/0x12")
	err := y3.ObserveReader(bytes.NewReader(buf), []y3.Path{path}, func(v y3.Observed) error {
		s, err := v.String()
		fmt.Println(s)
		return err
	})
	fmt.Println(err)
	// Output:
	// a
	// <nil>
}

func ExampleMarshal() {
	type NoiseData struct {
		Noise float32 `y3:"0x11"`
		Time  int64   `y3:"0x12"`
		From  string  `y3:"0x13"`
	}
	buf, err := y3.Marshal(0x10, NoiseData{Noise: 40, Time: 1600000000000, From: "127.0.0.1"})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", buf)
	var back NoiseData
	fmt.Println(y3.Unmarshal(buf, 0x10, &back), back.From)
	_, err = y3.Marshal(0x01, int32(1))
	fmt.Println(y3.KindOf(err))
	// Output:
	// 81199017110242201206aec8bbba800013093132372e302e302e31
	// <nil> 127.0.0.1
	// reserved_tag
}

func ExampleBeginNode() {
	dst, m, _ := y3.BeginNode(nil, y3.Golang, y3.NodeTag(0x10))
	dst, _ = y3.AppendInt32(dst, y3.Golang, 0x11, 1)
	dst, _ = y3.AppendString(dst, y3.Golang, 0x12, "a")
	dst, _ = m.End(dst)
	fmt.Printf("% x\n", dst)
	// Output: 90 06 11 01 01 12 01 61
}

func ExampleItem() {
	item := y3.NewNode(0x01,
		y3.Item{ID: 0x02, Value: y3.Int32(-1)},
		y3.NewNode(0x03, y3.Item{ID: 0x04, Value: y3.String("C")}),
	)
	for _, d := range []y3.Dialect{y3.Golang, y3.NVarInt, y3.Draft02} {
		b, _ := item.Encode(d)
		fmt.Printf("%-8v % x (EncodedLen %d)\n", d, b, item.EncodedLen(d))
	}
	// Output:
	// golang   81 08 02 01 7f 83 03 04 01 43 (EncodedLen 10)
	// nvarint  81 08 02 01 ff 83 03 04 01 43 (EncodedLen 10)
	// draft02  01 08 02 01 7f 03 03 04 01 43 (EncodedLen 10)
}
