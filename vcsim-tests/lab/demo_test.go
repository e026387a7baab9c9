package lab_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vapi/tags"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// TestStartDemo: the demo's lab has the sample VMs, shown to Started before
// they are tagged, every one but files-NN tagged; ChurnEvery changes their
// data until cancelled, then returns.
func TestStartDemo(t *testing.T) {
	needTool(t, "mkfs.ext4", "e2fsprogs")
	needTool(t, "mkfs.vfat", "dosfstools")
	ctx := context.Background()
	if _, _, err := lab.StartDemo(ctx, lab.DemoOptions{Dir: t.TempDir()}); err == nil {
		t.Fatal("a demo without sample VMs started")
	}
	var seen []lab.Sample
	l, samples, err := lab.StartDemo(ctx, lab.DemoOptions{Dir: filepath.Join(t.TempDir(), "lab"), VMs: 3, DiskSize: 16 << 20,
		TagCategory: "Environment", Tag: "production", Started: func(_ *lab.Lab, s []lab.Sample) { seen = s }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if len(samples) != 3 || samples[0].Name != "web-01" || samples[1].Name != "db-01" || samples[2].Name != "files-01" || len(seen) != 3 {
		t.Fatalf("samples %+v, Started saw %d", samples, len(seen))
	}
	if l.Password() == "" || l.Password() == "pass" {
		t.Errorf("lab password %q is not a random one", l.Password())
	}

	rc := rest.NewClient(l.Admin().Client)
	if err := rc.Login(ctx, url.UserPassword(l.Username(), l.Password())); err != nil {
		t.Fatal(err)
	}
	defer rc.Logout(ctx)
	m := tags.NewManager(rc)
	cat, err := m.GetCategory(ctx, "Environment")
	if err != nil {
		t.Fatal(err)
	}
	tag, err := m.GetTagForCategory(ctx, "production", cat.ID)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := m.ListAttachedObjects(ctx, tag.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Reference().Value)
	}
	want := []string{samples[0].MoRef, samples[1].MoRef}
	sort.Strings(got)
	sort.Strings(want)
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("tagged %v, want web-01 and db-01 %v", got, want)
	}

	web := samples[0]
	data := func() []byte {
		var b []byte
		for _, a := range web.DataAreas {
			d, err := l.ReadDisk(web.MoRef, 0, a.Off, int(a.Len))
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, d...)
		}
		return b
	}
	before := data()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.ChurnEvery(cctx, samples[:1], 10*time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	deadline := time.Now().Add(20 * time.Second)
	for bytes.Equal(data(), before) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("ChurnEvery wrote nothing in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ChurnEvery did not return once cancelled")
	}
}
