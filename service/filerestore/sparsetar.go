package filerestore

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmvault/vmvault/guestfs"
)

// sparseMinHoles is how many bytes of holes make a tar entry sparse: below
// it the plain entry is simpler for every extractor and costs little.
const sparseMinHoles = 1 << 20

// ErrTooSparse: a file claims more bytes than its volume can hold, so only
// a sparse copy can carry it; sending it whole would stream zeros (a 1 PiB
// claim in a hostile image wrote 7.6 GB in 12 s and went on).
var ErrTooSparse = fmt.Errorf("file larger than its volume: %w", guestfs.ErrCorrupt)

// dataRanges returns the sorted, clipped, merged data extents of f and
// whether the reader knew them.
func dataRanges(f guestfs.File) ([][2]int64, bool) {
	s, ok := f.(guestfs.Sparse)
	if !ok {
		return nil, false
	}
	rs, ok := s.DataExtents()
	if !ok {
		return nil, false
	}
	size := f.Size()
	out := make([][2]int64, 0, len(rs))
	for _, r := range rs {
		off, end := max(r[0], 0), min(r[0]+r[1], size)
		if r[1] <= 0 || end <= off {
			continue
		}
		out = append(out, [2]int64{off, end - off})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	merged := out[:0]
	for _, r := range out {
		if k := len(merged); k > 0 && r[0] <= merged[k-1][0]+merged[k-1][1] {
			merged[k-1][1] = max(merged[k-1][1], r[0]+r[1]-merged[k-1][0])
			continue
		}
		merged = append(merged, r)
	}
	return merged, true
}

// paxRecord formats one PAX extended header record: "LEN key=value\n",
// LEN counting its own digits.
func paxRecord(k, v string) string {
	body := " " + k + "=" + v + "\n"
	n := len(body) + 1
	for len(strconv.Itoa(n))+len(body) != n {
		n++
	}
	return strconv.Itoa(n) + body
}

// rawHeader formats a single header block with the standard library and
// gives it typeflag typ (the library refuses to write 'x' blocks itself).
func rawHeader(h *tar.Header, typ byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(h); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if len(b) != 512 {
		return nil, fmt.Errorf("tar header of %d bytes", len(b))
	}
	b[156] = typ
	copy(b[148:156], "        ")
	var sum int64
	for _, c := range b {
		sum += int64(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b, nil
}

func pad(w io.Writer, n int64) error {
	if r := n % 512; r != 0 {
		_, err := w.Write(make([]byte, 512-r))
		return err
	}
	return nil
}

// writeSparse writes a file as a PAX "GNU sparse 1.0" entry (what GNU tar
// writes with --sparse --sparse-version=1.0; GNU tar, bsdtar and Go's
// archive/tar restore the holes): a PAX header with the real name and
// size, then in the entry's data the map of data extents in decimal,
// padded to a block, then only the data. out is the writer beneath tw,
// which has been flushed.
func writeSparse(out io.Writer, name string, fi fs.FileInfo, ranges [][2]int64, r io.ReaderAt, size int64) error {
	var m strings.Builder
	n := len(ranges)
	tail := n == 0 || ranges[n-1][0]+ranges[n-1][1] < size
	if tail {
		n++ // a trailing hole: a last empty extent at the end says how long the file is
	}
	fmt.Fprintf(&m, "%d\n", n)
	var data int64
	for _, rg := range ranges {
		fmt.Fprintf(&m, "%d\n%d\n", rg[0], rg[1])
		data += rg[1]
	}
	if tail {
		fmt.Fprintf(&m, "%d\n0\n", size)
	}
	mapLen := int64(m.Len())
	if r := mapLen % 512; r != 0 {
		mapLen += 512 - r
	}
	stored := mapLen + data
	recs := paxRecord("GNU.sparse.major", "1") + paxRecord("GNU.sparse.minor", "0") +
		paxRecord("GNU.sparse.name", name) + paxRecord("GNU.sparse.realsize", strconv.FormatInt(size, 10)) +
		paxRecord("size", strconv.FormatInt(stored, 10)) +
		paxRecord("mtime", strconv.FormatInt(fi.ModTime().Unix(), 10))
	mtime := fi.ModTime()
	if mtime.Before(time.Unix(0, 0)) || mtime.Year() > 2200 {
		mtime = time.Unix(0, 0) // the PAX record carries it; the octal field cannot
	}
	xh, err := rawHeader(&tar.Header{Name: "PaxHeaders.0/sparse", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(recs)), ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}, tar.TypeXHeader)
	if err != nil {
		return err
	}
	fieldSize := stored
	if fieldSize >= 1<<33 {
		fieldSize = 0 // over the octal field: the PAX size record is what counts
	}
	fh, err := rawHeader(&tar.Header{Name: "GNUSparseFile.0/sparse", Typeflag: tar.TypeReg, Mode: int64(guestfs.UnixPerm(fi.Mode())), Size: fieldSize, ModTime: mtime, Format: tar.FormatUSTAR}, tar.TypeReg)
	if err != nil {
		return err
	}
	for _, b := range [][]byte{xh, []byte(recs)} {
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	if err := pad(out, int64(len(recs))); err != nil {
		return err
	}
	if _, err := out.Write(fh); err != nil {
		return err
	}
	if _, err := io.WriteString(out, m.String()); err != nil {
		return err
	}
	if err := pad(out, int64(m.Len())); err != nil {
		return err
	}
	for _, rg := range ranges {
		if _, err := io.CopyN(out, io.NewSectionReader(r, rg[0], rg[1]), rg[1]); err != nil {
			return err
		}
	}
	return pad(out, data)
}
