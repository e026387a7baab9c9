package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vmvault/vmvault/service/instant"
)

func init() {
	register(&command{name: "instant export", summary: "serve a restore point's disks over NFS v3 (copy-on-write), until Ctrl-C", run: runInstantExport})
}

func runInstantExport(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "instant export")
	rf := addRepoFlags(fs)
	pointID := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	listen := fs.String("listen", ":2049", "NFS and MOUNT address HOST:PORT")
	portmapDefault := ""
	if os.Geteuid() == 0 {
		portmapDefault = ":111"
	}
	pm := fs.String("portmap", portmapDefault, `portmapper address HOST:PORT ("off": none; default :111 when root, else none)`)
	var allow stringList
	fs.Var(&allow, "allow", "client network (CIDR or address) that may mount the export; repeatable (default: loopback only)")
	overlayDir := fs.String("overlay", "", "directory of the copy-on-write overlay (default: a new temporary directory); an overlay of the same point left by --keep-overlay is reopened")
	keep := fs.Bool("keep-overlay", false, "keep the overlay (what clients wrote) when the export ends")
	limitMiB := fs.Int64("overlay-limit-mib", instant.DefaultOverlayLimit>>20, "bytes clients may write per disk, in MiB (a write past it fails with NFS3ERR_NOSPC)")
	asJSON := fs.Bool("json", false, "print one JSON line when the export is ready")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *pointID == "" {
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	if *limitMiB <= 0 {
		return fmt.Errorf("%w: --overlay-limit-mib must be positive", errUsage)
	}
	if *pm == "off" {
		*pm = ""
	}
	prefixes, err := instant.ParseAllow(allow)
	if err != nil {
		return fmt.Errorf("%w: --%v", errUsage, err)
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()

	dir := *overlayDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "vmvault-instant-"); err != nil {
			return err
		}
	}
	sess, err := instant.Open(ctx, r, instant.Options{Point: *pointID, Dir: dir, OverlayLimit: *limitMiB << 20, NoSync: rf.noFsync})
	if err != nil {
		if *overlayDir == "" {
			os.RemoveAll(dir)
		}
		return err
	}
	defer func() {
		if *keep {
			sess.Close()
			fmt.Fprintf(env.stderr, "overlay kept in %s\n", dir)
			return
		}
		if err := sess.Remove(); err != nil {
			fmt.Fprintf(env.stderr, "remove overlay %s: %v\n", dir, err)
		}
	}()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := instant.NewServer(instant.ServerOptions{Listen: *listen, Portmap: *pm, Allow: prefixes})
	srv.Add(sess)
	if err := srv.Start(sctx); err != nil {
		return err
	}
	defer srv.Close()

	var files []string
	for _, f := range sess.Files() {
		files = append(files, f.Name)
	}
	var out bytes.Buffer
	if *asJSON {
		b, _ := json.Marshal(struct {
			Export  string   `json:"export"`
			Files   []string `json:"files"`
			Listen  string   `json:"listen"`
			Portmap string   `json:"portmap"`
			Overlay string   `json:"overlay"`
		}{sess.Export, files, srv.Addr(), srv.PortmapAddr(), dir})
		out.Write(append(b, '\n'))
	} else {
		fmt.Fprintf(&out, "exporting restore point %s of %s\n", short(sess.Point.ID), sess.Point.VM.Name)
		fmt.Fprintf(&out, "  export:  %s\n  files:   %s\n  nfs:     %s (NFS v3 and MOUNT v3, TCP)\n", sess.Export, strings.Join(files, " "), srv.Addr())
		if srv.PortmapAddr() != "" {
			fmt.Fprintf(&out, "  portmap: %s\n", srv.PortmapAddr())
		}
		fmt.Fprintf(&out, "  overlay: %s\nCtrl-C ends the export\n", filepath.Clean(dir))
	}
	env.stdout.Write(out.Bytes())
	if env.instantReady != nil {
		env.instantReady(out.String())
	}
	<-ctx.Done()
	return nil
}
