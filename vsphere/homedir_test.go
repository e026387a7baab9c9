package vsphere

import "testing"

// TestHomeDir: the home of an instant VM is its configuration file's
// directory, never the datastore's root.
func TestHomeDir(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"[LocalDS_0] web01-instant/web01-instant.vmx", "[LocalDS_0] web01-instant"},
		{"[LocalDS_0] a/b/c.vmx", "[LocalDS_0] a/b"},
		{"[LocalDS_0] vm.vmx", ""},
		{"[LocalDS_0] /vm.vmx", ""},
		{"[LocalDS_0]", ""},
		{"not a path", ""},
	} {
		if got := homeDir(tc.in); got != tc.want {
			t.Errorf("homeDir(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
