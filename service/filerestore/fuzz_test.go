package filerestore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmvault/vmvault/guestfs"
)

// FuzzSelection: any user selection is refused or cleaned into paths inside
// the volume, none under another, with a base every one of them is under;
// SafeName never lets a component climb or carry a separator.
func FuzzSelection(f *testing.F) {
	for _, s := range []string{"/etc\x00/etc/hostname", "../x", "/a/../../b", "/\x00/", `..\..\evil`, "C:x\x00/home/alice"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		paths := strings.Split(in, "\x00")
		sel, base, err := Selection(paths)
		if err != nil {
			return
		}
		for i, p := range sel {
			if p != "." && !filepath.IsLocal(p) {
				t.Fatalf("selected %q is not inside the volume", p)
			}
			if base != "." && p != base && !strings.HasPrefix(p, base+"/") {
				t.Fatalf("%q not under base %q", p, base)
			}
			for j, q := range sel {
				if i != j && (q == "." || strings.HasPrefix(p, q+"/")) {
					t.Fatalf("%q is under %q, both selected", p, q)
				}
			}
		}
		for _, p := range paths {
			for _, c := range strings.Split(p, "/") {
				n, ok := SafeName(c)
				if ok && (n == "." || n == ".." || strings.ContainsAny(n, `/\:`) || !filepath.IsLocal(n)) {
					t.Fatalf("SafeName(%q) = %q", c, n)
				}
			}
		}
		if _, err := guestfs.CleanPath(in); err == nil && strings.Contains(in, "\x00") {
			t.Fatalf("CleanPath accepted a NUL")
		}
	})
}
