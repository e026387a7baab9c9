package fsutil

import (
	"errors"
	"io"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestReadSeqHoldsEOFForTheNextCall(t *testing.T) {
	r := strings.NewReader("hello")
	var off int64
	p := make([]byte, 3)
	var got []string
	for {
		n, err := ReadSeq(r, p, &off)
		if n > 0 {
			if err != nil {
				t.Fatalf("read of %d bytes returned %v; io.Reader wants nil with data", n, err)
			}
			got = append(got, string(p[:n]))
			continue
		}
		if err != io.EOF {
			t.Fatalf("end: %v, want io.EOF", err)
		}
		break
	}
	if want := []string{"hel", "lo"}; !reflect.DeepEqual(got, want) || off != 5 {
		t.Fatalf("reads %q, off %d; want %q, 5", got, off, want)
	}
}

func TestBaseName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{".", "."}, {"", "."}, {"a", "a"}, {"a/b/c.txt", "c.txt"},
	} {
		if got := BaseName(tc.in); got != tc.want {
			t.Errorf("BaseName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWalk(t *testing.T) {
	// Nodes are paths; a node is a directory when it has no dot.
	isDir := func(n string) bool { return !strings.Contains(n, ".") }
	errMissing := errors.New("missing")
	known := map[string]bool{"/a": true, "/a/f.txt": true}
	step := func(dir, c string) (string, error) {
		n := dir + "/" + c
		if !known[n] {
			return "", errMissing
		}
		return n, nil
	}
	for _, tc := range []struct {
		name, want string
		err        string
	}{
		{name: ".", want: ""},
		{name: "a/f.txt", want: "/a/f.txt"},
		{name: "a/x", err: "missing"},
		{name: "a/f.txt/y", err: "a/f.txt/y: not a directory"},
	} {
		got, err := Walk("", tc.name, isDir, step)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("Walk(%q) error %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Walk(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestSortedEntries(t *testing.T) {
	m := fstest.MapFS{"b": {}, "c": {}, "a": {}}
	ents, err := fs.ReadDir(m, ".")
	if err != nil {
		t.Fatal(err)
	}
	rev := []fs.DirEntry{ents[2], ents[0], ents[1]}
	var names []string
	for _, e := range SortedEntries(rev) {
		names = append(names, e.Name())
	}
	if want := []string{"a", "b", "c"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("order %q, want %q", names, want)
	}
}

func TestFIFOPutEvictsOldest(t *testing.T) {
	m := map[int]string{}
	var order []int
	for i := 1; i <= 4; i++ {
		FIFOPut(m, &order, 3, i, "v")
	}
	if _, ok := m[1]; ok || len(m) != 3 || !reflect.DeepEqual(order, []int{2, 3, 4}) {
		t.Fatalf("map %v, order %v; want 1 dropped and order [2 3 4]", m, order)
	}
}

func TestPathErr(t *testing.T) {
	var pe *fs.PathError
	if err := PathErr("open", "a/b", fs.ErrNotExist); !errors.As(err, &pe) || pe.Op != "open" || pe.Path != "a/b" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("PathErr gave %#v", err)
	}
}
