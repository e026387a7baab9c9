package repository

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/golden files")

// Fixed keys for golden files: encryption key 0x00..0x1f, id key 0x20..0x3f.
func goldenMaster() []byte {
	m := make([]byte, 64)
	for i := range m {
		m[i] = byte(i)
	}
	return m
}

// goldenCodec is the codec of the golden files: an encrypted one with the
// HMAC-SHA-256 ids of formats 1.0-1.2, whose packs and records the golden
// files pin (a 1.3 repository differs only in its id function).
func goldenCodec(t testing.TB, encrypted bool) *codec {
	t.Helper()
	return goldenCodecID(t, encrypted, IDMACHMACSHA256)
}

func goldenCodecID(t testing.TB, encrypted bool, idMAC string) *codec {
	t.Helper()
	var c *codec
	var err error
	if encrypted {
		m := goldenMaster()
		c, err = newCodec(m[:32], m[32:], idMAC, "fastest")
	} else {
		c, err = newCodec(nil, nil, "", "fastest")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

func toHex(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		sb.WriteString(hex.EncodeToString(b[:n]))
		sb.WriteByte('\n')
		b = b[n:]
	}
	return sb.String()
}

func fromHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, "\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/golden/name (hex), or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(toHex(got)), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create)", err)
	}
	if want := fromHex(t, string(b)); !bytes.Equal(got, want) {
		t.Fatalf("%s: encoding changed (format drift!)\ngot:\n%swant:\n%s", name, toHex(got), toHex(want))
	}
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	return fromHex(t, string(b))
}

func goldenEntries() []packEntry {
	var a, b ID
	for i := range a {
		a[i], b[i] = byte(i), byte(0xff-i)
	}
	return []packEntry{
		{Type: BlobData, Flags: flagZstd, RawLen: 1 << 20, StoredLen: 1000, Offset: packStart, ID: a},
		{Type: BlobSegment, Flags: 0, RawLen: 65, StoredLen: 65, Offset: packStart + 1000, ID: b},
	}
}

func TestGoldenMagics(t *testing.T) {
	var all []byte
	for _, m := range [][8]byte{magicPack, magicPackHeader, magicPackTrailer, magicSegment, magicRoot, magicManifest, magicRecord, magicKey} {
		all = append(all, m[:]...)
	}
	golden(t, "magics.hex", all)
	golden(t, "magics_v11.hex", magicSegment11[:])
}

func TestGoldenPackHeader(t *testing.T) {
	e := goldenEntries()
	h := encodePackHeader(e)
	if len(h) != packHeaderFixed+2*packEntrySize {
		t.Fatalf("header size %d", len(h))
	}
	golden(t, "pack_header.hex", h)
	golden(t, "pack_trailer.hex", encodeTrailer(h))
	got, err := decodePackHeader(h, packStart+1065, false)
	if err != nil || len(got) != 2 || got[0] != e[0] || got[1] != e[1] {
		t.Fatalf("round trip: %v %v", got, err)
	}
}

func goldenExtents() []Extent {
	var id ID
	id[0], id[31] = 0xab, 0xcd
	return []Extent{
		{Offset: segmentSpan, Length: 1 << 20, ID: id},
		{Offset: segmentSpan + 1<<20, Length: 3 << 20, Zero: true},
	}
}

func TestGoldenSegmentAndRoot(t *testing.T) {
	ext := goldenExtents()
	seg := encodeSegment(segmentSpan, ext)
	golden(t, "segment.hex", seg)
	s, err := decodeSegment(seg)
	if err != nil || s.Start != segmentSpan || len(s.Extents) != 2 || s.Extents[0] != ext[0] || s.Extents[1] != ext[1] {
		t.Fatalf("segment round trip: %+v %v", s, err)
	}
	var a, b ID
	a[0], b[0] = 1, 2
	root := diskRoot{Size: segmentSpan + 4<<20, Span: segmentSpan, Segs: []segRef{{0, segmentSpan, a}, {segmentSpan, 4 << 20, b}}}
	rb := encodeRoot(root)
	golden(t, "root.hex", rb)
	got, err := decodeRoot(rb)
	if err != nil || got.Size != root.Size || len(got.Segs) != 2 || got.Segs[1] != root.Segs[1] {
		t.Fatalf("root round trip: %+v %v", got, err)
	}
}

func goldenManifest() manifest {
	var mapID, cfg ID
	mapID[0], cfg[0] = 0x11, 0x22
	return manifest{
		VM:          VMIdentity{Name: "web01", MoRef: "vm-42", InstanceUUID: "5012-abcd", VCenter: "vc.example"},
		Time:        time.Date(2026, 11, 29, 3, 4, 5, 0, time.UTC),
		Parent:      "ff00",
		Consistency: "application",
		Config:      cfg,
		Disks: []Disk{{Key: 2000, Label: "Hard disk 1", Capacity: 1 << 30, Map: mapID, ChangeID: "52 de/1",
			Stats: DiskStats{LogicalBytes: 1 << 30, AllocatedBytes: 1 << 20, BytesRead: 1 << 20, NewBytes: 4096, StoredBytes: 2048, Mode: "cbt"}}},
		Warnings: []string{"quiesce fell back"},
		Tags:     map[string]string{"b": "2", "a": "1"},
	}
}

func TestGoldenManifest(t *testing.T) {
	b, err := encodeManifest(goldenManifest())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "manifest.hex", b)
	m, err := decodeManifest(b)
	if err != nil || m.VM.Name != "web01" || m.Disks[0].Stats.Mode != "cbt" || m.Tags["a"] != "1" {
		t.Fatalf("manifest round trip: %+v %v", m, err)
	}
}

func TestGoldenRecord(t *testing.T) {
	var mid ID
	mid[0] = 0x33
	rec := record{Manifest: mid, Locked: true}
	c := goldenCodec(t, false)
	b := c.encodeRecord(rec)
	golden(t, "record_plain.hex", b)
	if got, err := c.decodeRecord(b); err != nil || got != rec {
		t.Fatalf("record round trip: %+v %v", got, err)
	}
	// Sealed records use a random nonce: the golden file is decoded, not compared.
	ce := goldenCodec(t, true)
	if *update {
		golden(t, "record_sealed.hex", ce.encodeRecord(rec))
	}
	if got, err := ce.decodeRecord(readGolden(t, "record_sealed.hex")); err != nil || got != rec {
		t.Fatalf("sealed record: %+v %v", got, err)
	}
}

func TestGoldenIDs(t *testing.T) {
	data := []byte("vmvault golden blob")
	plain, enc := goldenCodec(t, false).id(data), goldenCodec(t, true).id(data)
	golden(t, "ids.hex", append(plain[:], enc[:]...))
}

// TestGoldenIDsBLAKE3 pins the id function of format 1.3 to a value the
// codec did not compute: b3sum 1.2.0 (the BLAKE3 authors' implementation),
// `b3sum --keyed` with the golden id key 0x20..0x3f on stdin.
func TestGoldenIDsBLAKE3(t *testing.T) {
	const want = "b9ce8dd21d55c0356273250a50112498ba13913e094c7b32e48b728285fb3544"
	id := goldenCodecID(t, true, IDMACBLAKE3).id([]byte("vmvault golden blob"))
	if got := hex.EncodeToString(id[:]); got != want {
		t.Fatalf("blake3-keyed id = %s, want %s", got, want)
	}
}

// goldenPack builds a pack with one raw (incompressible-sized) data blob.
func goldenPack(t testing.TB, c *codec, pid packID) ([]byte, []byte) {
	data := []byte("tiny") // zstd cannot shrink 4 bytes: stored raw, deterministic
	id := c.id(data)
	stored, _, flags := c.encode(nil, nil, BlobData, id, data)
	e := packEntry{Type: BlobData, Flags: flags, RawLen: 4, StoredLen: uint32(len(stored)), Offset: packStart, ID: id}
	hdr := c.sealMeta(encodePackHeader([]packEntry{e}), packHeaderAD(pid))
	var pack []byte
	pack = append(pack, magicPack[:]...)
	pack = append(pack, stored...)
	pack = append(pack, hdr...)
	pack = append(pack, encodeTrailer(hdr)...)
	return pack, data
}

func TestGoldenPacks(t *testing.T) {
	var pid packID
	pid[0] = 0x44
	for _, enc := range []bool{false, true} {
		c := goldenCodec(t, enc)
		name := map[bool]string{false: "pack_plain.hex", true: "pack_sealed.hex"}[enc]
		if *update || !enc {
			pack, _ := goldenPack(t, c, pid)
			golden(t, name, pack) // the unencrypted pack is fully deterministic
		}
		pack := readGolden(t, name)
		entries, _, err := decodePackFile(c, pid, bytes.NewReader(pack), int64(len(pack)))
		if err != nil || len(entries) != 1 {
			t.Fatalf("%s: %v", name, err)
		}
		e := entries[0]
		got, err := c.decode(nil, e, append([]byte(nil), pack[e.Offset:e.Offset+uint64(e.StoredLen)]...))
		if err != nil || string(got) != "tiny" {
			t.Fatalf("%s: blob %q %v", name, got, err)
		}
		// A sealed header is bound to its pack id.
		if enc {
			var other packID
			if _, _, err := decodePackFile(c, other, bytes.NewReader(pack), int64(len(pack))); err == nil {
				t.Fatal("sealed header accepted under another pack id")
			}
		}
	}
}

func TestGoldenConfig(t *testing.T) {
	path := filepath.Join("testdata", "golden", "config.json")
	if *update {
		dir := t.TempDir()
		if err := Init(t.Context(), dir, []byte("golden"), InitOptions{Chunker: TestChunker, KDF: TestKDF}); err != nil {
			t.Fatal(err)
		}
		// Replace the random master key with the fixed golden one.
		b, _ := os.ReadFile(filepath.Join(dir, "config"))
		cf, err := decodeConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		cf.Encryption.WrappedKey, err = wrapKey(deriveKEK([]byte("golden"), cf.Encryption.KDF), goldenMaster(), keyAD(cf.ID))
		if err != nil {
			t.Fatal(err)
		}
		cf.Created = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
		out, _ := jsonIndent(cf)
		os.WriteFile(path, out, 0o644)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := decodeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if cf.Version != (FormatVersion{1, 0}) || cf.Chunker != TestChunker || cf.PackSize != DefaultPackSize || cf.Encryption == nil {
		t.Fatalf("golden config decoded as %+v", cf)
	}
	m, err := unwrapKey(deriveKEK([]byte("golden"), cf.Encryption.KDF), cf.Encryption.WrappedKey, keyAD(cf.ID))
	if err != nil || !bytes.Equal(m, goldenMaster()) {
		t.Fatalf("golden key does not unwrap to the golden master key: %v", err)
	}
	if _, err := unwrapKey(deriveKEK([]byte("wrong"), cf.Encryption.KDF), cf.Encryption.WrappedKey, keyAD(cf.ID)); err != ErrWrongPassword {
		t.Fatalf("wrong passphrase: %v", err)
	}
}

func goldenImage() []byte {
	img := make([]byte, 640<<10)
	for i := 64 << 10; i < 192<<10; i++ {
		img[i] = "golden repository "[i%18]
	}
	copy(img[384<<10:], testDisk(7, 8<<10))
	img[384<<10] = 1
	return img
}

// TestGoldenRepositoryV1 opens a tiny repository written by format v1.0
// (kept in testdata forever, without index.db) and restores it.
func TestGoldenRepositoryV1(t *testing.T) {
	src := filepath.Join("testdata", "repo-v1.0")
	if *update {
		os.RemoveAll(src)
		r := TestRepository(t, WithDir(src), WithPassword("golden"))
		p := backup(t, r, "golden", testTime, goldenImage())
		r.Lock(t.Context(), p.ID)
		r.Close()
		os.Remove(filepath.Join(src, "index.db"))
		os.RemoveAll(filepath.Join(src, "locks"))
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	r, err := Open(t.Context(), dir, []byte("golden"), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pts, err := r.List(t.Context())
	if err != nil || len(pts) != 1 || !pts[0].Locked || pts[0].VM.Name != "golden" {
		t.Fatalf("points %+v %v", pts, err)
	}
	verifyPoint(t, r, pts[0].ID, goldenImage())
	requireClean(t, r)
}

// goldenImageV12 is goldenImage with 8 KiB rewritten at 100 KiB: the second
// point of testdata/repo-v1.2, stored as slices of the first point's blob
// around a new piece.
func goldenImageV12() []byte {
	img := goldenImage()
	for i := 100 << 10; i < 108<<10; i++ {
		img[i] = byte(i * 7)
	}
	return img
}

// TestGoldenRepositoryV12 opens a repository written by vmvault at format
// 1.2 (commit 4b75db6, the last before 1.3; kept in testdata forever,
// without index.db): a full point, an incremental made of slices of its
// blob around a new piece (v1.1 segments) and a time lock on the first
// (v1.2). It restores both, and this version goes on writing HMAC-SHA-256
// ids into it: a backup of the first point's image adds no data.
func TestGoldenRepositoryV12(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "repo-v1.2"))); err != nil {
		t.Fatal(err)
	}
	r, err := Open(t.Context(), dir, []byte("golden"), OpenOptions{NoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c := r.Config(); c.Version != (FormatVersion{1, 2}) || c.IDMAC != IDMACHMACSHA256 {
		t.Fatalf("config %+v: want version 1.2 with hmac-sha256 ids", c)
	}
	pts, err := r.List(t.Context())
	if err != nil || len(pts) != 2 {
		t.Fatalf("points %+v %v", pts, err)
	}
	slices.SortFunc(pts, func(a, b Point) int { return a.Time.Compare(b.Time) })
	if pts[1].Parent != pts[0].ID {
		t.Fatalf("the second point's parent is %q, want %q", pts[1].Parent, pts[0].ID)
	}
	_, ext, err := r.DiskExtents(t.Context(), pts[1].ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ext, func(e Extent) bool { return e.Slice }) {
		t.Fatal("the fixture's incremental holds no slice")
	}
	verifyPoint(t, r, pts[0].ID, goldenImage())
	verifyPoint(t, r, pts[1].ID, goldenImageV12())
	until, err := r.LockedUntil(t.Context(), pts[0].ID)
	if want := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC); err != nil || !until.Equal(want) {
		t.Fatalf("time lock of the first point: %v %v, want %v", until, err, want)
	}
	requireClean(t, r)
	before := uniqueBytes(t, r)
	backup(t, r, "golden", testTime.Add(2*time.Hour), goldenImage()) // the first point's chunks again
	if grew := uniqueBytes(t, r) - before; grew > 4<<10 {
		t.Fatalf("a backup of the same image into the 1.2 repository added %d unique bytes: its ids no longer match", grew)
	}
	requireClean(t, r)
}

// TestGoldenSegmentV11 pins the v1.1 segment (one with a slice). A v1.0
// reader refuses it: its magic is not the v1.0 segment magic.
func TestGoldenSegmentV11(t *testing.T) {
	ext := goldenExtents()
	ext = append(ext, Extent{Offset: segmentSpan + 4<<20, Length: 4096, ID: ext[0].ID, Skip: 8192, Slice: true})
	seg := encodeSegment(segmentSpan, ext)
	golden(t, "segment_v11.hex", seg)
	if [8]byte(seg[:8]) == magicSegment || len(seg) != segmentHeaderSize+3*segment11EntrySize {
		t.Fatal("a v1.1 segment must not look like a v1.0 one")
	}
	s, err := decodeSegment(seg)
	if err != nil || len(s.Extents) != 3 {
		t.Fatalf("v1.1 segment round trip: %+v %v", s, err)
	}
	for i := range ext {
		if s.Extents[i] != ext[i] {
			t.Fatalf("extent %d: got %+v, want %+v", i, s.Extents[i], ext[i])
		}
	}
	// The v1.0 golden segment still decodes as before.
	if _, err := decodeSegment(readGolden(t, "segment.hex")); err != nil {
		t.Fatal(err)
	}
	// Canonical encoding: a v1.1 segment without slices, and a slice in a
	// v1.0 segment, are refused.
	noSlice := append([]byte(nil), seg...)
	noSlice[segmentHeaderSize+2*segment11EntrySize+8] = extentKindData
	for i := 41; i < 49; i++ {
		noSlice[segmentHeaderSize+2*segment11EntrySize+i] = 0
	}
	if _, err := decodeSegment(noSlice); err == nil {
		t.Fatal("a v1.1 segment without a slice was accepted")
	}
	v10 := readGolden(t, "segment.hex")
	v10[segmentHeaderSize+8] = extentKindSlice
	if _, err := decodeSegment(v10); err == nil {
		t.Fatal("a slice in a v1.0 segment was accepted")
	}
}

// v1.2: the point hold (FORMAT.md §8a) and the appliance configuration (§8b).
func TestGoldenHoldAndAppConfig(t *testing.T) {
	var pid ID
	pid[0] = 0x44
	until := time.Unix(1_800_000_000, 0).UTC()
	c := goldenCodec(t, false)
	golden(t, "hold_plain.hex", c.encodeHold(pid, until))
	if name := holdName(pid, until); name != "holds/"+pid.String()+"-00000000001800000000" {
		t.Fatalf("hold name %q", name)
	}
	const name = "appconfig/01800000000000000000-0011223344556677"
	golden(t, "appconfig_plain.hex", c.encodeAppConfig(name, []byte(`{"jobs":[]}`)))
	ce := goldenCodec(t, true)
	if *update {
		golden(t, "hold_sealed.hex", ce.encodeHold(pid, until))
		golden(t, "appconfig_sealed.hex", ce.encodeAppConfig(name, []byte(`{"jobs":[]}`)))
	}
	if id, u, err := ce.decodeHold(readGolden(t, "hold_sealed.hex")); err != nil || id != pid || !u.Equal(until) {
		t.Fatalf("sealed hold: %v %v %v", id, u, err)
	}
	if b, err := ce.decodeAppConfig(name, readGolden(t, "appconfig_sealed.hex")); err != nil || string(b) != `{"jobs":[]}` {
		t.Fatalf("sealed appliance configuration: %q %v", b, err)
	}
	if _, err := ce.decodeAppConfig(name[:len(name)-1]+"8", readGolden(t, "appconfig_sealed.hex")); err == nil {
		t.Fatal("a sealed appliance configuration decoded under another name")
	}
	golden(t, "magics_v12.hex", append(magicHold[:], magicAppConfig[:]...))
}
