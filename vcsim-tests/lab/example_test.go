package lab_test

import (
	"context"
	"fmt"

	"github.com/vmvault/vmvault/vcsim-tests/lab"
)

// A lab with real disk content, written while a backup snapshot exists.
func ExampleStart() {
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{DiskCapacity: 4 << 20})
	if err != nil {
		panic(err)
	}
	defer l.Close()

	// Connect with: vsphere.Config{URL: l.URL().String(), Username: l.Username(),
	// Password: l.Password(), Thumbprint: l.Thumbprint()}.
	if err := l.WriteDisk("DC0_H0_VM0", 0, 0, []byte("boot sector")); err != nil {
		panic(err)
	}
	b, _ := l.ReadDisk("DC0_H0_VM0", 0, 0, 11)
	fmt.Println(len(l.VMNames()), string(b))
	// Output: 4 boot sector
}
