package catalog

import (
	"testing"
)

// FuzzPattern: any pattern compiles or is ErrBadPattern, and its matcher
// answers on any path without panicking.
func FuzzPattern(f *testing.F) {
	for _, s := range [][2]string{{"*.conf", "/etc/nginx/nginx.conf"}, {"/home/*/report.docx", "/home/a/report.docx"}, {"[x", "/x"}, {"Grüße", "/unicode/grüße.txt"}, {"\\", "/a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		m, err := compile(pattern)
		if err != nil {
			return
		}
		m(lowerInto(nil, []byte(p)))
	})
}

// FuzzDecodeFile: a damaged catalog value is refused, never a panic.
func FuzzDecodeFile(f *testing.F) {
	f.Add([]byte{1, 5, 2})
	f.Add([]byte{9})
	f.Add([]byte{})
	f.Add([]byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, size, _, ok := decodeFile(b)
		if ok && (typ == "" || size < 0) {
			t.Fatalf("decoded %q %d from %x", typ, size, b)
		}
	})
}
