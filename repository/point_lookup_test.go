package repository

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// plantPoints writes n catalog point entries with chosen ids (no data: the
// lookups under test read the catalog only).
func plantPoints(t testing.TB, r *Repository, ids []string) {
	t.Helper()
	err := r.db.Update(func(tx *bolt.Tx) error {
		for i, id := range ids {
			p := Point{ID: id, VM: VMIdentity{Name: fmt.Sprintf("vm-%d", i)}, Time: testTime.Add(time.Duration(i) * time.Second)}
			if err := putPointTx(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestPointLookupByPrefix(t *testing.T) {
	r := TestRepository(t)
	ctx := context.Background()
	a := "ab12" + strings.Repeat("0", 60)
	b := "ab13" + strings.Repeat("0", 60)
	c := "ab1f" + strings.Repeat("1", 60)
	d := "c0" + strings.Repeat("2", 62)
	plantPoints(t, r, []string{a, b, c, d})
	for _, tc := range []struct {
		prefix, want string
		err          error
	}{
		{a, a, nil},
		{strings.ToUpper(b), b, nil},
		{" " + c + " ", c, nil},
		{"ab12", a, nil},
		{"ab13", b, nil},
		{"ab1f", c, nil},
		{"ab1", "", ErrAmbiguous},  // odd length: a, b and c share it
		{"ab", "", ErrAmbiguous},   // even length
		{"c", d, nil},              // one nibble
		{"c0222", d, nil},          // odd length, unique
		{"c0223", "", ErrNotFound}, // odd last nibble excludes it
		{"ab1g", "", ErrNotFound},  // not hex
		{"abz", "", ErrNotFound},   // not hex in the odd nibble
		{"", "", ErrNotFound},      // empty
		{a + "0", "", ErrNotFound}, // longer than an id
		{"ff", "", ErrNotFound},    // past every key
		{"00", "", ErrNotFound},    // before every key
		{strings.Repeat("a", 64), "", ErrNotFound},
	} {
		p, err := r.Point(ctx, tc.prefix)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("Point(%q) = %v, %v; want %v", tc.prefix, p.ID, err, tc.err)
			}
			continue
		}
		if err != nil || p.ID != tc.want {
			t.Errorf("Point(%q) = %q, %v; want %q", tc.prefix, p.ID, err, tc.want)
		}
	}
}

// BenchmarkPointLookup: GET /restore-points/{id} looks a point up per
// request; with 30,000 points (30 per VM on 1,000 VMs) listing them all
// decoded 30,000 JSON entries for one answer.
func BenchmarkPointLookup(b *testing.B) {
	r := TestRepository(b)
	ctx := context.Background()
	ids := make([]string, 30000)
	for i := range ids {
		h := sha256.Sum256([]byte(fmt.Sprint(i)))
		ids[i] = hex.EncodeToString(h[:])
	}
	plantPoints(b, r, ids)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := ids[i%len(ids)]
		if p, err := r.Point(ctx, id); err != nil || p.ID != id {
			b.Fatal(p.ID, err)
		}
	}
}
