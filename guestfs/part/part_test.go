package part

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// Seeds come from real tables: sfdisk (a primary, an extended partition
// with three logical ones, packed into the first 48 sectors) and sgdisk
// (GPT with an EFI and an LVM partition named "data ü").
func load(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gptDisk rebuilds the 1 MiB sgdisk image from its head and tail.
func gptDisk(t testing.TB) []byte {
	d := make([]byte, 1<<20)
	copy(d, load(t, "gpt-head.bin"))
	tail := load(t, "gpt-tail.bin")
	copy(d[len(d)-len(tail):], tail)
	return d
}

func TestMBRLogical(t *testing.T) {
	d := make([]byte, 1<<20)
	copy(d, load(t, "mbr-logical.bin"))
	tb, err := Read(bytes.NewReader(d), int64(len(d)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Partition{{Number: 1, Start: 4 * 512, Size: 4 * 512, Type: "0x83"}, {Number: 5, Start: 10 * 512, Size: 2048, Type: "0x83"},
		{Number: 6, Start: 16 * 512, Size: 2048, Type: "0x82"}, {Number: 7, Start: 22 * 512, Size: 2048, Type: "0x8e"}}
	if tb.Kind != "mbr" || len(tb.Partitions) != len(want) {
		t.Fatalf("got %+v", tb)
	}
	for i := range want {
		if tb.Partitions[i] != want[i] {
			t.Errorf("partition %d = %+v, want %+v", i, tb.Partitions[i], want[i])
		}
	}
	// An EBR chain that points back at itself ends with an error, not a
	// hang: the last EBR (sector 21) gets a "next" entry pointing at the
	// second one (sector 8+7 = 15).
	loop := append([]byte(nil), d...)
	next := loop[21*512+446+16:]
	next[4] = 0x05
	copy(next[8:], []byte{7, 0, 0, 0})
	copy(next[12:], []byte{8, 0, 0, 0})
	tb, err = Read(bytes.NewReader(loop), int64(len(loop)))
	if err == nil || tb == nil || len(tb.Partitions) != 4 {
		t.Errorf("looping EBR chain: %+v, %v", tb, err)
	}
}

func TestGPT(t *testing.T) {
	d := gptDisk(t)
	tb, err := Read(bytes.NewReader(d), int64(len(d)))
	if err != nil {
		t.Fatal(err)
	}
	if tb.Kind != "gpt" || len(tb.Partitions) != 2 || tb.Partitions[1].Name != "data ü" || tb.Partitions[1].Type != GPTTypeLinuxLVM ||
		tb.Partitions[0].Start != 34*512 || tb.Partitions[1].Size != 400*512 {
		t.Fatalf("got %+v", tb)
	}
	// Primary header destroyed: the backup at the disk's end serves.
	broken := append([]byte(nil), d...)
	broken[512+20] ^= 0xff
	tb2, err := Read(bytes.NewReader(broken), int64(len(broken)))
	if err != nil || len(tb2.Partitions) != 2 {
		t.Fatalf("backup GPT: %+v %v", tb2, err)
	}
	// Both destroyed: an error, not a guess.
	broken[len(broken)-512+20] ^= 0xff
	if _, err := Read(bytes.NewReader(broken), int64(len(broken))); err == nil {
		t.Fatal("damaged GPT accepted")
	}
	if _, err := Read(bytes.NewReader(make([]byte, 4096)), 4096); !errors.Is(err, ErrNoTable) {
		t.Fatalf("blank disk: %v", err)
	}
}

func FuzzRead(f *testing.F) {
	f.Add(load(f, "mbr-logical.bin"))
	f.Add(load(f, "gpt-head.bin"))
	f.Fuzz(func(t *testing.T, b []byte) {
		Read(bytes.NewReader(b), int64(len(b)))
	})
}
