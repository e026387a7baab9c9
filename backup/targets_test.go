package backup

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/vmvault/vmvault/vsphere"
)

type fakeContainers struct {
	vms   map[string][]string // container -> VM ids
	err   error
	calls int
}

func (f *fakeContainers) VMsIn(_ context.Context, containers ...string) ([]vsphere.VMRef, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	var out []vsphere.VMRef
	for _, c := range containers {
		for _, id := range f.vms[c] {
			out = append(out, vsphere.VMRef{MoRef: id})
		}
	}
	return out, nil
}

func TestTargets(t *testing.T) {
	boom := errors.New("no such folder")
	cases := []struct {
		name           string
		vms, in        []string
		err            error
		want           []string
		wantErr, asked bool
	}{
		{name: "named only, containers not asked", vms: []string{"web", "db"}, want: []string{"web", "db"}},
		{name: "named twice once", vms: []string{"web", "web"}, want: []string{"web"}},
		{name: "containers after the named", vms: []string{"vm-9"}, in: []string{"/dc/vm/prod"}, want: []string{"vm-9", "vm-1", "vm-2"}, asked: true},
		{name: "a VM in two containers once", in: []string{"/dc/vm/prod", "/dc/host/c1"}, want: []string{"vm-1", "vm-2", "vm-3"}, asked: true},
		{name: "lookup error", vms: []string{"web"}, in: []string{"/nope"}, err: boom, wantErr: true, asked: true},
		{name: "empty container", in: []string{"/dc/vm/empty"}, asked: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeContainers{err: c.err, vms: map[string][]string{
				"/dc/vm/prod": {"vm-1", "vm-2"}, "/dc/host/c1": {"vm-2", "vm-3"},
			}}
			got, err := Targets(context.Background(), f, c.vms, c.in)
			if c.wantErr {
				if !errors.Is(err, boom) {
					t.Fatalf("err = %v, want the lookup's", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("targets %q, want %q", got, c.want)
			}
			if (f.calls > 0) != c.asked {
				t.Errorf("containers asked %d times, want asked=%v", f.calls, c.asked)
			}
		})
	}
}
