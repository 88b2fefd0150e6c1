package peer

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseTag reads a data tag written as hexadecimal (`0x33`) or decimal (`51`).
func ParseTag(text string) (uint32, error) {
	base, digits := 10, text
	if rest, ok := strings.CutPrefix(strings.ToLower(text), "0x"); ok {
		base, digits = 16, rest
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid tag %q (expected 0x33 or 51)", text)
	}
	return uint32(v), nil
}

// FormatTag writes a tag the way the JSON reports show it: `0x33`.
func FormatTag(tag uint32) string {
	return fmt.Sprintf("%#x", tag)
}
