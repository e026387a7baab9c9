package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/vmvault/vmvault/service/filerestore"
	"github.com/vmvault/vmvault/service/verify"
)

func init() {
	register(&command{name: "point verify", summary: "walk every file system of a restore point without booting it (--read-data: every file's bytes too); --boot: instant-recover it in isolation, wait for the Tools heartbeat, probe, tear down", run: runPointVerify})
}

// pointVerifyErrors bounds the errors listed on stderr per failed volume
// (--json has the kept ones, up to verify.DefaultMaxErrors).
const pointVerifyErrors = 10

func runPointVerify(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "point verify")
	rf := addRepoFlags(fs)
	point := fs.String("restore-point", "", "restore point id or unique prefix (required)")
	readData := fs.Bool("read-data", false, "also read every regular file's data to the end (every blob it uses is verified)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	bf := addBootVerifyFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, pos)
	}
	if *point == "" {
		return fmt.Errorf("%w: --restore-point is required", errUsage)
	}
	if bf.boot {
		return runPointVerifyBoot(ctx, env, rf, bf, *point, *readData, *asJSON)
	}
	if bf.used() {
		return fmt.Errorf("%w: --port, --url, --network, --host and the NFS flags need --boot", errUsage)
	}
	r, err := rf.open(ctx, env)
	if err != nil {
		return err
	}
	defer r.Close()
	svc, err := verify.New(filerestore.Single(rf.dir, r), nil)
	if err != nil {
		return err
	}
	bar := newProgress(env, *asJSON)
	defer bar.Finish()
	rep, err := svc.VerifyPoint(ctx, *point, verify.Options{ReadData: *readData, Progress: func(p verify.Progress) {
		phase := fmt.Sprintf("verify volume %d/%d", min(p.VolumesDone+1, p.Volumes), p.Volumes)
		if *readData {
			bar.Update(phase, p.BytesRead, 0, true)
		} else {
			bar.Update(phase+" entries", p.Entries, 0, false)
		}
	}})
	bar.Finish()
	if err != nil {
		return err
	}
	if *asJSON {
		if err := writeJSON(env.stdout, rep); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		for _, v := range rep.Volumes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.ID, v.FS, sanitize(v.Label), v.Status, volumeLine(v, *readData))
		}
		tw.Flush()
		fmt.Fprintf(env.stdout, "%s: %s\n", rep.Verdict, sanitize(rep.Reason))
		for _, v := range rep.Volumes {
			shown := v.Errors[:min(len(v.Errors), pointVerifyErrors)]
			for _, e := range shown {
				fmt.Fprintf(env.stderr, "%s: %s: %s: %s\n", v.ID, sanitize(e.Path), e.Op, sanitize(e.Error))
			}
			if more := v.ErrorCount - int64(len(shown)); more > 0 {
				fmt.Fprintf(env.stderr, "%s: … and %d more error(s) (--json lists the first %d)\n", v.ID, more, len(v.Errors))
			}
		}
	}
	if !rep.Passed {
		return fmt.Errorf("%w: restore point %s: %s", verify.ErrFailed, short(rep.RestorePoint), sanitize(rep.Reason))
	}
	return nil
}

// volumeLine is the end of a volume's line: what was walked, or why not.
func volumeLine(v verify.VolumeResult, readData bool) string {
	if v.Status == verify.StatusSkipped {
		return sanitize(v.Reason)
	}
	s := fmt.Sprintf("%d dirs, %d files, %d links, %s", v.Dirs, v.Files, v.Symlinks, humanBytes(v.Bytes))
	if readData {
		s += fmt.Sprintf(" (%s read)", humanBytes(v.BytesRead))
	}
	s += " in " + time.Duration(v.Seconds*float64(time.Second)).Round(time.Millisecond).String()
	if v.Status == verify.StatusFailed {
		s += "; " + sanitize(v.Reason)
	}
	return s
}
