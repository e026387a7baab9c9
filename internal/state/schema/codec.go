package schema

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Format bytes: the first byte of every value.
const (
	// FormatRaw marks the one bucket whose values carry no format byte
	// (meta); it is never written into a value.
	FormatRaw byte = 0x00
	// FormatJSON: a JSON document follows.
	FormatJSON byte = 0x01
	// FormatBytes: opaque bytes follow (a string, an id, a hash).
	FormatBytes byte = 0x02
	// FormatTime: 8 bytes follow, big endian, the Unix time in nanoseconds
	// with its sign bit flipped (so byte order is time order); all zero is
	// the zero time.
	FormatTime byte = 0x03
	// FormatEmpty: nothing follows (an index entry whose key says it all).
	FormatEmpty byte = 0x04
)

// ErrFormat is returned for a value whose format byte is not the one
// expected or whose payload does not decode.
var ErrFormat = errors.New("state value format")

func formatName(f byte) string {
	switch f {
	case FormatRaw:
		return "raw"
	case FormatJSON:
		return "json"
	case FormatBytes:
		return "bytes"
	case FormatTime:
		return "time"
	case FormatEmpty:
		return "empty"
	}
	return fmt.Sprintf("unknown format %#02x", f)
}

// payload returns b's payload if its format byte is want.
func payload(b []byte, want byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty value, want %s", ErrFormat, formatName(want))
	}
	if b[0] != want {
		return nil, fmt.Errorf("%w: %s value, want %s", ErrFormat, formatName(b[0]), formatName(want))
	}
	return b[1:], nil
}

// Encode returns v as a FormatJSON value.
func Encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode value: %w", err)
	}
	return append([]byte{FormatJSON}, b...), nil
}

// Decode reads a FormatJSON value into v.
func Decode(b []byte, v any) error {
	p, err := payload(b, FormatJSON)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return nil
}

// EncodeBytes returns p as a FormatBytes value (a new slice).
func EncodeBytes(p []byte) []byte { return append([]byte{FormatBytes}, p...) }

// DecodeBytes returns the payload of a FormatBytes value. It aliases b:
// copy it to keep it past the transaction.
func DecodeBytes(b []byte) ([]byte, error) { return payload(b, FormatBytes) }

// TimeBits maps t to an unsigned integer in time order: the zero time is 0,
// otherwise the Unix nanoseconds with the sign bit flipped (times before
// 1678 or after 2262 saturate as time.UnixNano does).
func TimeBits(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano()) ^ (1 << 63)
}

// BitsTime is TimeBits' inverse, in UTC.
func BitsTime(bits uint64) time.Time {
	if bits == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(bits^(1<<63))).UTC()
}

// EncodeTime returns t as a FormatTime value.
func EncodeTime(t time.Time) []byte {
	return binary.BigEndian.AppendUint64([]byte{FormatTime}, TimeBits(t))
}

// DecodeTime reads a FormatTime value (in UTC).
func DecodeTime(b []byte) (time.Time, error) {
	p, err := payload(b, FormatTime)
	if err != nil {
		return time.Time{}, err
	}
	if len(p) != 8 {
		return time.Time{}, fmt.Errorf("%w: time of %d bytes, want 8", ErrFormat, len(p))
	}
	return BitsTime(binary.BigEndian.Uint64(p)), nil
}

// EncodeEmpty returns a FormatEmpty value (an index entry).
func EncodeEmpty() []byte { return []byte{FormatEmpty} }

// Check reports whether b is a well-formed value of format f: the format
// byte, and a payload that decodes (valid JSON, 8 bytes of time, nothing).
func Check(f byte, b []byte) error {
	if f == FormatRaw {
		return nil
	}
	p, err := payload(b, f)
	if err != nil {
		return err
	}
	switch f {
	case FormatJSON:
		if !json.Valid(p) {
			return fmt.Errorf("%w: invalid JSON", ErrFormat)
		}
	case FormatTime:
		if len(p) != 8 {
			return fmt.Errorf("%w: time of %d bytes, want 8", ErrFormat, len(p))
		}
	case FormatEmpty:
		if len(p) != 0 {
			return fmt.Errorf("%w: %d bytes after an empty value's format byte", ErrFormat, len(p))
		}
	}
	return nil
}

// Value returns the payload of a value for code that still reads a bucket
// raw (a RawWriter's reader): without the format byte when b starts with
// one, b unchanged otherwise (a value written raw, before its writer was
// switched). It is only sound for buckets whose raw values can never
// start with a format byte: JSON objects ('{') and text. It aliases b.
func Value(b []byte) []byte {
	if len(b) > 0 && b[0] >= FormatJSON && b[0] <= FormatEmpty {
		return b[1:]
	}
	return b
}
