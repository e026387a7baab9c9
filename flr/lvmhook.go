package flr

import "context"

// lvmVolumes assembles the logical volumes of the physical volumes found.
// notes gives a reason to show on a PV (by volume ID) when its VG cannot be
// assembled.
func lvmVolumes(ctx context.Context, pvs []located) (lvs []located, notes map[string]string) {
	return nil, nil
}
