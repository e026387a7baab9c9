package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/vmvault/vmvault/dedup"
	"github.com/vmvault/vmvault/disk/vmdk"
	"github.com/vmvault/vmvault/internal/extent"
	"github.com/vmvault/vmvault/repository"
	"github.com/vmvault/vmvault/vsphere"
)

// QuiesceMode says what to do when the guest cannot be quiesced.
type QuiesceMode string

// Quiesce modes.
const (
	QuiesceRequire QuiesceMode = "require" // fail the backup
	QuiescePrefer  QuiesceMode = "prefer"  // fall back to crash-consistent, with a warning
	QuiesceOff     QuiesceMode = "off"     // never quiesce
)

// ParseQuiesce validates a quiesce mode ("" is prefer).
func ParseQuiesce(s string) (QuiesceMode, error) {
	switch QuiesceMode(s) {
	case "":
		return QuiescePrefer, nil
	case QuiesceRequire, QuiescePrefer, QuiesceOff:
		return QuiesceMode(s), nil
	}
	return "", fmt.Errorf("quiesce mode %q: want require, prefer or off", s)
}

// Consistency a restore point records.
const (
	ConsistencyApplication = "application" // VSS with writers (Windows guest, Tools running)
	ConsistencyFilesystem  = "filesystem"  // guest file systems frozen (VSS without writers, fsfreeze)
	ConsistencyCrash       = "crash"       // as after a power loss
)

// Read modes of a disk (and of a VM: incremental if any disk was, else
// allocated if any disk was, else full).
const (
	ModeFull        = "full"        // every byte of the disk was read
	ModeAllocated   = "allocated"   // only the allocated areas (CBT "*")
	ModeIncremental = "incremental" // only the areas changed since the parent
)

// Tag keys the engine records in every restore point.
const (
	tagDiskUUID = "disk.%d.uuid" // the disk's identity, checked before an incremental
	tagSnapshot = "snapshot"
	// tagDiskReader is how a disk was read: readerDatastore or readerNFC.
	tagDiskReader = "disk.%d.reader"
	// tagUserSnapshots is "true" when the VM carried snapshots of its own
	// (not part of the point: a restore rebuilds the VM without them).
	tagUserSnapshots = "user_snapshots"
	// tagTemplate is "true" for a template (read at rest, no snapshot).
	tagTemplate = "template"
)

// Disk readers a DiskReport (and the point's disk.N.reader tag) names.
const (
	ReaderDatastore = "datastore" // HTTP range reads of the flat extent
	ReaderNFC       = "nfc"       // NFC export stream, filtered by CBT
)

// EngineOptions bound concurrency and memory and tune the cleanup.
type EngineOptions struct {
	// Workers and InFlight size each disk pipeline (see Options).
	Workers, InFlight int
	// DiskParallel is how many disks of one VM are read at once (default 2).
	DiskParallel int
	// MaxActiveDisks is the one worker budget shared by every VM of the
	// engine: at most this many disk pipelines run at once (default 4), so
	// memory is about MaxActiveDisks * ((InFlight+Workers) * chunk size +
	// the chunker's read-ahead (2 x 8 MiB) + the prefetch window (8 MiB)),
	// whatever the number of VMs or disks.
	MaxActiveDisks int
	// PerDatastore bounds the disks read from one datastore at once (default 2).
	PerDatastore int
	// KeepCBTOff never turns CBT on: every backup reads whole disks.
	KeepCBTOff bool
	// QuiesceTimeout is passed to vSphere (default 15 min).
	QuiesceTimeout time.Duration
	// RemoveAttempts, RemoveBackoff and RemoveTimeout govern the snapshot
	// removal that runs whatever happened (defaults 3, 2 s, 10 min).
	RemoveAttempts int
	RemoveBackoff  time.Duration
	RemoveTimeout  time.Duration
	// VCenter names the vCenter in restore point identities.
	VCenter string
	// ProgressEvery is the disk progress interval (default 500 ms).
	ProgressEvery time.Duration
	// ExportDir stages the CBT-selected extents of disks read through NFC
	// export (default os.TempDir()); it needs room for one disk's changed
	// (or, on a first backup, allocated) bytes per active disk.
	ExportDir string
	// CBTVerifyFraction is the share of the blocks CBT reports unchanged
	// that an incremental re-reads from vSphere and compares with the
	// parent restore point (default DefaultCBTVerifyFraction; negative: no
	// verification). The sample rotates with every backup, so each block
	// is checked once every 1/fraction backups. A difference means CBT
	// missed a write: the disk is read whole and the point says so.
	CBTVerifyFraction float64
	// CBTVerifyBlock is the size of a sampled block (default 64 KiB).
	CBTVerifyBlock int64
}

func (o EngineOptions) withDefaults() EngineOptions {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.DiskParallel <= 0 {
		o.DiskParallel = 2
	}
	if o.MaxActiveDisks <= 0 {
		o.MaxActiveDisks = 4
	}
	if o.PerDatastore <= 0 {
		o.PerDatastore = 2
	}
	if o.RemoveAttempts <= 0 {
		o.RemoveAttempts = 3
	}
	if o.RemoveBackoff <= 0 {
		o.RemoveBackoff = 2 * time.Second
	}
	if o.RemoveTimeout <= 0 {
		o.RemoveTimeout = 10 * time.Minute
	}
	switch {
	case o.CBTVerifyFraction == 0:
		o.CBTVerifyFraction = DefaultCBTVerifyFraction
	case o.CBTVerifyFraction < 0:
		o.CBTVerifyFraction = 0
	case o.CBTVerifyFraction > 1:
		o.CBTVerifyFraction = 1
	}
	if o.CBTVerifyBlock <= 0 {
		o.CBTVerifyBlock = DefaultCBTVerifyBlock
	}
	return o
}

// Engine backs up VMs into one repository. It is safe for concurrent use;
// every call shares its disk budget.
type Engine struct {
	vs    VSphere
	store Store
	opts  EngineOptions

	diskSem chan struct{}
	dsMu    sync.Mutex
	dsSem   map[string]chan struct{}
	running map[string]bool // VM morefs being backed up, guarded by dsMu
}

// NewEngine returns an engine reading from vs and writing to store.
func NewEngine(vs VSphere, store Store, opts EngineOptions) *Engine {
	opts = opts.withDefaults()
	return &Engine{vs: vs, store: store, opts: opts, diskSem: make(chan struct{}, opts.MaxActiveDisks),
		dsSem: map[string]chan struct{}{}, running: map[string]bool{}}
}

// Request is one VM to back up.
type Request struct {
	// VM is a name, an inventory path or a managed object id.
	VM      string
	Quiesce QuiesceMode // "" is prefer
	// Level is how deep the guest is quiesced ("" is LevelApplication) and
	// VSSType the VSS backup type of application quiescing ("" is copy).
	Level   QuiesceLevel
	VSSType VSSType
	// Progress, when set, is called with the VM's progress (from several
	// goroutines, never at once).
	Progress func(VMProgress)
	// Tags are added to the restore point's tags.
	Tags map[string]string
	// RequireAllDisks fails the VM (before any snapshot) when one of its
	// disks cannot be backed up (independent, physical-mode RDM, …)
	// instead of skipping that disk with a warning.
	RequireAllDisks bool
	// ActiveFullEvery makes every Nth backup of the VM an active full:
	// every disk read whole, CBT not consulted (0: never; 1: always).
	ActiveFullEvery int
	// ActiveFullAfter makes the backup an active full when the VM's last
	// full backup is older than this (0: never).
	ActiveFullAfter time.Duration
	// Transport is how disks are read ("" is auto: HotAdd, then network,
	// then NFC, per disk, the reason for each fallback recorded).
	Transport Transport
}

// VMProgress is a snapshot of one VM's backup.
type VMProgress struct {
	VM    string
	Phase string // prepare, snapshot, disks, commit, done
	Disks []DiskProgress
	// Totals over the disks.
	Size, Done, BytesRead, NewBytes int64
	Elapsed                         time.Duration
}

// DiskProgress is one disk's progress within a VM.
type DiskProgress struct {
	Key  int32
	Mode string
	Progress
}

// Rate is the VM's logical throughput in bytes per second.
func (p VMProgress) Rate() float64 {
	if p.Elapsed <= 0 {
		return 0
	}
	return float64(p.Done) / p.Elapsed.Seconds()
}

// ETA estimates the time left from the rate so far.
func (p VMProgress) ETA() time.Duration {
	r := p.Rate()
	if r <= 0 || p.Done >= p.Size {
		return 0
	}
	return time.Duration(float64(p.Size-p.Done) / r * float64(time.Second))
}

// Result is what one VM's backup produced.
type Result struct {
	VM           vsphere.VMRef
	RestorePoint string
	Parent       string
	Consistency  string
	// Quiesce says what was asked of the guest and what it gave (also set
	// when the backup failed because the guest could not be quiesced).
	Quiesce QuiesceReport
	Mode    string
	// EnabledCBT: CBT was off and this backup turned it on (so it read
	// every allocated area; the next one is incremental).
	EnabledCBT   bool
	Disks        []DiskReport
	LogicalBytes int64
	BytesRead    int64 // from vSphere
	NewBytes     int64 // plaintext bytes the repository did not have
	StoredBytes  int64
	Started      time.Time
	Duration     time.Duration
	Warnings     []string
	// SnapshotLeft is the snapshot that could not be removed ("" when the
	// cleanup succeeded); the next backup of the VM sweeps it.
	SnapshotLeft string
	// CBTMismatch: the CBT verification found a block CBT called unchanged
	// that differs from the parent (an alert: the affected disks were
	// read whole; see the warnings).
	CBTMismatch bool
}

// DiskReport is one disk's part of a Result.
type DiskReport struct {
	Key      int32
	Index    int // position in the restore point
	Label    string
	Capacity int64
	Mode     string
	// Reader is ReaderHotAdd, ReaderDatastore (the network transport) or
	// ReaderNFC.
	Reader string
	// TransportReason says why the disk was not read by the first
	// transport of the policy, as the chain of attempts ("hotadd: … ->
	// network: … 403 … -> nfc"); "" when the first one read it.
	TransportReason string
	// Reason says why the disk was not read incrementally ("" when it was,
	// or when there was no parent).
	Reason          string
	ChangeID        string
	BytesRead       int64
	ParentBytesRead int64
	NewBytes        int64
	StoredBytes     int64
	ZeroBytes       int64
	ReusedBytes     int64
	Duration        time.Duration
	// Method is how an incremental derived the new map (dedup.MethodRechunk
	// or dedup.MethodSlices, chosen by the cost rule); empty otherwise.
	Method dedup.Method
	// CompactedWindows counts the windows the slice method rewrote with CDC.
	CompactedWindows int
	// VerifiedBlocks is how many CBT-unchanged blocks were compared with
	// the parent; MismatchedBlocks how many of them differed.
	VerifiedBlocks, MismatchedBlocks int
}

// Outcome is one VM of BackupVMs.
type Outcome struct {
	Request Request
	Result  Result
	Err     error
}

// BackupVMs backs up several VMs, at most parallel at once (default 4). The
// disk budget is shared, so memory does not grow with the number of VMs.
// Each VM succeeds or fails on its own.
func (e *Engine) BackupVMs(ctx context.Context, reqs []Request, parallel int) []Outcome {
	if parallel <= 0 {
		parallel = 4
	}
	out := make([]Outcome, len(reqs))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, r := range reqs {
		g.Go(func() error {
			res, err := e.BackupVM(ctx, r)
			out[i] = Outcome{Request: r, Result: res, Err: err}
			return nil
		})
	}
	_ = g.Wait()
	return out
}

// BackupVM backs up one VM into a new restore point. On error nothing is
// committed (chunks already written are reused by the next backup or
// reclaimed) and the snapshot, if one was taken, is removed all the same.
func (e *Engine) BackupVM(ctx context.Context, req Request) (res Result, err error) {
	start := time.Now()
	res.Started = start
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: back up %s: %v\n%s", ErrPanic, req.VM, v, debug.Stack())
		}
		res.Duration = time.Since(start)
		if err != nil {
			res.RestorePoint = ""
		}
	}()
	mode, err := ParseQuiesce(string(req.Quiesce))
	if err != nil {
		return res, err
	}
	level, err := ParseLevel(string(req.Level))
	if err != nil {
		return res, err
	}
	vss, err := ParseVSSType(string(req.VSSType))
	if err != nil {
		return res, err
	}
	transport, err := ParseTransport(string(req.Transport))
	if err != nil {
		return res, err
	}
	if _, ok := e.vs.(HotAddOpener); !ok && transport == TransportHotAdd {
		// Before any snapshot: nothing to clean up, and the error says what to set.
		return res, fmt.Errorf("%w: back up %s: the job's transport is hotadd but the appliance is not set up for HotAdd "+
			"(it must run as a VM of this vCenter, found by its BIOS UUID or the configured appliance VM)", ErrTransport, req.VM)
	}
	if req.VM == "" {
		return res, errors.New("back up: no VM given")
	}
	prog := &progressAgg{fn: req.Progress, start: start}
	prog.p.VM = req.VM
	prog.phase("prepare")

	vm, err := e.vs.FindVM(ctx, req.VM)
	if err != nil {
		return res, fmt.Errorf("find VM %s: %w", req.VM, err)
	}
	res.VM = vm.VMRef
	if !e.claim(vm.MoRef) {
		return res, fmt.Errorf("%w: %s", ErrBusy, vm.Name)
	}
	defer e.unclaim(vm.MoRef)
	if reason := unsupportedVM(vm); reason != "" {
		return res, fmt.Errorf("%w: %s: %s", ErrUnsupportedVM, vm.Name, reason)
	}
	removed, err := e.vs.RemoveStaleSnapshots(ctx, vm.VMRef, start)
	for _, s := range removed {
		res.Warnings = append(res.Warnings, fmt.Sprintf("removed stale snapshot %s (%s, created %s) left by an earlier run",
			s.MoRef, s.Name, s.Created.UTC().Format(time.RFC3339)))
	}
	if err != nil {
		return res, fmt.Errorf("sweep stale snapshots of %s: %w", vm.Name, err)
	}
	if len(removed) > 0 {
		if vm, err = e.vs.FindVM(ctx, vm.MoRef); err != nil {
			return res, fmt.Errorf("find VM %s after the sweep: %w", req.VM, err)
		}
	}
	if req.RequireAllDisks {
		var bad []string
		for _, d := range vm.Disks {
			if d.Unsupported != "" {
				bad = append(bad, fmt.Sprintf("disk %d (%s): %s", d.Key, d.Label, d.Unsupported))
			}
		}
		if len(bad) > 0 {
			return res, fmt.Errorf("%w: %s: the job requires every disk and %d cannot be backed up: %s",
				ErrUnsupportedVM, vm.Name, len(bad), strings.Join(bad, "; "))
		}
	}
	if vm.HasSnapshots {
		// Ours goes on top of the administrator's, which stay untouched: the
		// frozen state spans their delta chain, read through NFC export.
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s has snapshots of its own: they are left untouched and are not part of the restore point "+
			"(the current state is backed up; a restore rebuilds the VM without them)", vm.Name))
	}
	if !vm.CBTEnabled && !e.opts.KeepCBTOff && !vm.Template {
		if err := e.vs.EnableCBT(ctx, vm.VMRef); err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Warnings = append(res.Warnings, fmt.Sprintf("could not enable changed block tracking (%v): reading whole disks", err))
		} else {
			res.EnabledCBT = true
			res.Warnings = append(res.Warnings, "changed block tracking was off: enabled it; this backup reads every allocated area, the next one is incremental")
		}
	}
	parent, err := e.lastGood(ctx, vm)
	if err != nil {
		return res, err
	}
	var round int64
	if parent != nil {
		if r, err := strconv.ParseInt(parent.Tags[tagCBTRound], 10, 64); err == nil && r >= 0 {
			round = r + 1
		}
	}
	plan := diskPlan{round: round, activeFull: activeFullReason(req, parent, start), transport: transport}
	chunker, err := e.store.Chunker()
	if err != nil {
		return res, err
	}

	prog.phase("snapshot")
	snapStart := time.Now()
	var snap *vsphere.Snapshot
	var consistency string
	var qrep QuiesceReport
	if vm.Template {
		// vSphere cannot snapshot a template, and nothing writes its disks:
		// they are read at rest, whole (no CBT without a snapshot).
		snap = &vsphere.Snapshot{VM: vm.VMRef, Created: snapStart}
		for _, d := range vm.Disks {
			d.ChangeID = ""
			snap.Disks = append(snap.Disks, d)
		}
		consistency = ConsistencyCrash
		qrep = QuiesceReport{Requested: string(level), Obtained: consistency, Reason: ReasonTemplate, Detail: "a template is read at rest, without a snapshot"}
		if mode == QuiesceOff {
			qrep = QuiesceReport{Requested: "none", Obtained: consistency}
		}
	} else {
		var warns []string
		name := "backup-" + time.Now().UTC().Format("20060102T150405.000")
		snap, qrep, warns, err = e.snapshot(ctx, vm, name, mode, level, vss)
		res.Warnings = append(res.Warnings, warns...)
		res.Quiesce = qrep
		if err != nil {
			return res, err
		}
		consistency = qrep.Obtained
		// Registered before anything else can fail: the snapshot goes
		// whatever happens next, even a panic or a cancelled ctx.
		defer e.removeSnapshot(ctx, vm.VMRef, snap, &res)
	}
	res.Consistency, res.Quiesce = consistency, qrep
	snapTime := time.Since(snapStart)

	sess, err := e.store.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin repository session: %w", err)
	}
	defer sess.Abort() // no-op after Commit

	// Disks: skip what cannot be read, back up the rest in parallel.
	var todo []vsphere.Disk
	skipped := map[int32]string{}
	index := map[int32]int{}
	for _, d := range snap.Disks {
		if d.Unsupported != "" {
			if req.RequireAllDisks {
				return res, fmt.Errorf("%w: %s: the job requires every disk and disk %d (%s) cannot be backed up: %s",
					ErrUnsupportedVM, vm.Name, d.Key, d.Label, d.Unsupported)
			}
			skipped[d.Key] = d.Unsupported
			res.Warnings = append(res.Warnings, fmt.Sprintf("disk %d (%s) skipped: %s", d.Key, d.Label, d.Unsupported))
			continue
		}
		index[d.Key] = len(todo)
		todo = append(todo, d)
	}
	if len(todo) == 0 {
		return res, fmt.Errorf("%w: %s: no disk can be backed up", ErrUnsupportedVM, vm.Name)
	}
	prog.init(todo)
	prog.phase("disks")
	disksStart := time.Now()
	newDisks := make([]repository.NewDisk, len(todo))
	reports := make([]DiskReport, len(todo))
	warns := make([][]string, len(todo))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.opts.DiskParallel)
	for i, d := range todo {
		g.Go(func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("%w: disk %d of %s: %v\n%s", ErrPanic, d.Key, vm.Name, v, debug.Stack())
				}
			}()
			nd, rep, w, err := e.backupDisk(gctx, sess, chunker, snap, d, parent, plan, func(p Progress, mode string) { prog.disk(i, p, mode) })
			if err != nil {
				return fmt.Errorf("disk %d (%s) of %s: %w", d.Key, d.Label, vm.Name, err)
			}
			rep.Index = i
			newDisks[i], reports[i], warns[i] = nd, rep, w
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	disksTime := time.Since(disksStart)
	for i := range todo {
		res.Warnings = append(res.Warnings, warns[i]...)
		r := reports[i]
		res.Disks = append(res.Disks, r)
		res.LogicalBytes += r.Capacity
		res.BytesRead += r.BytesRead
		res.NewBytes += r.NewBytes
		res.StoredBytes += r.StoredBytes
	}
	res.Mode = vmMode(reports)

	prog.phase("commit")
	det := ConfigDetails{}
	if ds, ok := e.vs.(DetailSource); ok {
		if det, err = ds.ConfigDetails(ctx, vm.VMRef); err != nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("configuration details unavailable: %v", err))
		}
	}
	cfg, err := EncodeVMConfig(captureConfig(vm, snap.Disks, det, index, skipped))
	if err != nil {
		return res, err
	}
	when := snap.Created
	if when.IsZero() {
		when = snapStart
	}
	tags := map[string]string{
		tagSnapshot:        snap.Name,
		"quiesce":          string(mode),
		"timing.snapshot":  strconv.FormatFloat(snapTime.Seconds(), 'f', 3, 64),
		"timing.disks":     strconv.FormatFloat(disksTime.Seconds(), 'f', 3, 64),
		"timing.total":     strconv.FormatFloat(time.Since(start).Seconds(), 'f', 3, 64),
		"stats.bytes_read": strconv.FormatInt(res.BytesRead, 10),
		"stats.new_bytes":  strconv.FormatInt(res.NewBytes, 10),
		"mode":             res.Mode,
		tagTransport:       string(transport),
	}
	if res.EnabledCBT {
		tags["cbt.enabled_by_backup"] = "true"
	}
	qrep.Tags(tags)

	if vm.HasSnapshots {
		tags[tagUserSnapshots] = "true"
	}
	if vm.Template {
		tags[tagTemplate] = "true"
	}
	for _, r := range res.Disks {
		tags[fmt.Sprintf(tagDiskReader, r.Key)] = r.Reader
		if r.TransportReason != "" {
			tags[fmt.Sprintf(tagTransportReason, r.Key)] = r.TransportReason
		}
		if r.Reason != "" {
			tags[fmt.Sprintf(tagFullReason, r.Key)] = r.Reason
		}
		switch {
		case r.MismatchedBlocks > 0:
			tags[fmt.Sprintf(tagCBTVerify, r.Key)] = fmt.Sprintf("mismatch %d/%d", r.MismatchedBlocks, r.VerifiedBlocks)
			res.CBTMismatch = true
		case r.VerifiedBlocks > 0:
			tags[fmt.Sprintf(tagCBTVerify, r.Key)] = fmt.Sprintf("ok %d", r.VerifiedBlocks)
		}
	}
	tags[tagCBTRound] = strconv.FormatInt(round, 10)
	chainTags(tags, parent, res.Mode, when)
	if res.CBTMismatch {
		res.Warnings = append(res.Warnings, "CBT verification failed: changed block tracking missed writes on this VM; "+
			"the disks concerned were read whole (see the disk warnings) and their next backup is read whole too")
	}
	for _, d := range todo {
		if d.UUID != "" {
			tags[fmt.Sprintf(tagDiskUUID, d.Key)] = d.UUID
		}
	}
	for k, v := range req.Tags {
		tags[k] = v
	}
	np := repository.NewPoint{
		VM:   repository.VMIdentity{Name: vm.Name, MoRef: vm.MoRef, InstanceUUID: vm.InstanceUUID, VCenter: e.opts.VCenter},
		Time: when.UTC(), Consistency: consistency, Config: cfg, Disks: newDisks,
		Warnings: append([]string(nil), res.Warnings...), Tags: tags,
	}
	if parent != nil && res.Mode == ModeIncremental {
		np.Parent = parent.ID
		res.Parent = parent.ID
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	p, err := sess.Commit(ctx, np)
	if err != nil {
		return res, fmt.Errorf("commit restore point of %s: %w", vm.Name, err)
	}
	res.RestorePoint = p.ID
	prog.phase("done")
	return res, nil
}

// unsupportedVM says why a whole VM cannot be backed up.
func unsupportedVM(vm vsphere.VM) string {
	switch {
	case vm.Encrypted:
		return "it is encrypted: the datastore file service returns ciphertext"
	case len(vm.Disks) == 0:
		return "it has no disks"
	}
	return ""
}

// lastGood is the newest complete restore point of the VM, nil if none.
// Partial points are never parents.
func (e *Engine) lastGood(ctx context.Context, vm vsphere.VM) (*repository.Point, error) {
	points, err := e.store.Points(ctx)
	if err != nil {
		return nil, fmt.Errorf("list restore points: %w", err)
	}
	for i := len(points) - 1; i >= 0; i-- {
		p := points[i]
		if p.Partial || !sameVM(p.VM, vm, e.opts.VCenter) {
			continue
		}
		return &p, nil
	}
	return nil, nil
}

func sameVM(id repository.VMIdentity, vm vsphere.VM, vcenter string) bool {
	if id.VCenter != vcenter {
		return false
	}
	switch {
	case id.InstanceUUID != "" && vm.InstanceUUID != "":
		return id.InstanceUUID == vm.InstanceUUID
	case id.MoRef != "" && vm.MoRef != "":
		return id.MoRef == vm.MoRef
	}
	return id.Name == vm.Name
}

// createSnapshot takes the snapshot, once more after a transient failure
// (a dropped connection, a SystemError): the failed attempt may still have
// made a snapshot, so every snapshot of this appliance on the VM is swept
// first (the run's own sweep already removed the older ones and the VM is
// claimed by this run, so only that attempt's can be there; the cut-off is
// far ahead so that a vCenter clock ahead of ours cannot hide it).
func (e *Engine) createSnapshot(ctx context.Context, vm vsphere.VM, opts vsphere.SnapshotOptions) (*vsphere.Snapshot, error) {
	snap, err := e.vs.CreateSnapshot(ctx, vm.VMRef, opts)
	if err == nil || ctx.Err() != nil || !vsphere.IsTransient(err) {
		return snap, err
	}
	if _, serr := e.vs.RemoveStaleSnapshots(ctx, vm.VMRef, time.Now().Add(24*time.Hour)); serr != nil {
		return nil, fmt.Errorf("%w (and removing what the attempt may have left failed: %v)", err, serr)
	}
	snap, rerr := e.vs.CreateSnapshot(ctx, vm.VMRef, opts)
	if rerr != nil {
		return nil, fmt.Errorf("%w (retried after: %v)", rerr, err)
	}
	return snap, nil
}

// removeSnapshot removes the backup snapshot with a context of its own (the
// backup's may be cancelled), retrying; a failure is reported in res and
// left to the next run's sweep.
func (e *Engine) removeSnapshot(ctx context.Context, vm vsphere.VMRef, snap *vsphere.Snapshot, res *Result) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.RemoveTimeout)
	defer cancel()
	var err error
	for attempt := 1; attempt <= e.opts.RemoveAttempts; attempt++ {
		err = func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("%w: remove snapshot: %v", ErrPanic, v)
				}
			}()
			return e.vs.RemoveSnapshot(rctx, vm, snap.MoRef)
		}()
		switch {
		case err == nil:
			return
		case errors.Is(err, vsphere.ErrConsolidation):
			res.Warnings = append(res.Warnings, fmt.Sprintf("backup snapshot %s removed but its disks need consolidation: %v", snap.MoRef, err))
			return
		}
		if attempt < e.opts.RemoveAttempts {
			t := time.NewTimer(e.opts.RemoveBackoff << (attempt - 1))
			select {
			case <-rctx.Done():
				t.Stop()
				attempt = e.opts.RemoveAttempts
			case <-t.C:
			}
		}
	}
	res.SnapshotLeft = snap.MoRef
	res.Warnings = append(res.Warnings, fmt.Sprintf("could not remove backup snapshot %s (%s): %v; the next backup of this VM removes it", snap.MoRef, snap.Name, err))
}

// claim marks a VM as being backed up; false when it already is.
func (e *Engine) claim(moref string) bool {
	e.dsMu.Lock()
	defer e.dsMu.Unlock()
	if e.running[moref] {
		return false
	}
	e.running[moref] = true
	return true
}

func (e *Engine) unclaim(moref string) {
	e.dsMu.Lock()
	defer e.dsMu.Unlock()
	delete(e.running, moref)
}

// acquire takes a slot of the shared disk budget and of the datastore.
func (e *Engine) acquire(ctx context.Context, datastore string) (func(), error) {
	e.dsMu.Lock()
	ds := e.dsSem[datastore]
	if ds == nil {
		ds = make(chan struct{}, e.opts.PerDatastore)
		e.dsSem[datastore] = ds
	}
	e.dsMu.Unlock()
	select {
	case ds <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case e.diskSem <- struct{}{}:
	case <-ctx.Done():
		<-ds
		return nil, ctx.Err()
	}
	return func() { <-e.diskSem; <-ds }, nil
}

// backupDisk chooses the disk's read set and streams it into the session.
func (e *Engine) backupDisk(ctx context.Context, sess Session, chunker dedup.Chunker, snap *vsphere.Snapshot, d vsphere.Disk,
	parent *repository.Point, dp diskPlan, progress func(Progress, string),
) (repository.NewDisk, DiskReport, []string, error) {
	rep := DiskReport{Key: d.Key, Label: d.Label, Capacity: d.CapacityBytes, ChangeID: d.ChangeID}
	release, err := e.acquire(ctx, d.Datastore)
	if err != nil {
		return repository.NewDisk{}, rep, nil, err
	}
	defer release()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var warns []string
	in := DiskInput{Size: d.CapacityBytes}
	reason := ""
	// whole: read every byte, trusting nothing CBT says (not even "*").
	whole := false
	var parentR ParentReader
	var sample []dedup.Extent
	pidx, pd, havePD := parentDisk(parent, d.Key)
	switch {
	case parent == nil:
	case !havePD:
		reason = "the disk is new since the parent restore point"
	case d.ChangeID == "":
		reason = "changed block tracking is off"
	case pd.ChangeID == "" || pd.ChangeID == vsphere.AllocatedAreas:
		reason = "the parent restore point has no change id for this disk"
	case dp.activeFull != "":
		reason, whole = dp.activeFull, true
	case strings.HasPrefix(parent.Tags[fmt.Sprintf(tagCBTVerify, d.Key)], "mismatch"):
		reason, whole = "the parent restore point's CBT verification found writes CBT had missed", true
	case cbtDistrust(pd.ChangeID, d.ChangeID, pd.Capacity, d.CapacityBytes) != "":
		reason = cbtDistrust(pd.ChangeID, d.ChangeID, pd.Capacity, d.CapacityBytes)
	case parent.Tags[fmt.Sprintf(tagDiskUUID, d.Key)] != d.UUID:
		reason = "the disk's identity changed (uuid)"
	default:
		changed, err := e.vs.ChangedAreas(dctx, snap, d.Key, pd.ChangeID)
		if err != nil {
			if ctx.Err() != nil {
				return repository.NewDisk{}, rep, nil, ctx.Err()
			}
			reason = fmt.Sprintf("changed areas since the parent are unusable (%v)", err)
			break
		}
		pr, err := e.store.OpenParent(dctx, parent.ID, pidx)
		if err != nil {
			if ctx.Err() != nil {
				return repository.NewDisk{}, rep, nil, ctx.Err()
			}
			reason = fmt.Sprintf("the parent disk cannot be read (%v)", err)
			break
		}
		defer pr.Close()
		if pr.Size() != d.CapacityBytes {
			reason = fmt.Sprintf("the parent disk has %d bytes, the disk %d", pr.Size(), d.CapacityBytes)
			break
		}
		in.Parent = &ParentDisk{Reader: safeReader{pr}, Extents: pr.Extents(), Changed: toDedup(changed)}
		rep.Mode = ModeIncremental
		parentR = pr
		sample = verifySample(d.CapacityBytes, in.Parent.Changed, dp.round, e.opts.CBTVerifyFraction, e.opts.CBTVerifyBlock)
	}
	if in.Parent == nil && d.ChangeID != "" && !whole {
		alloc, err := e.vs.ChangedAreas(dctx, snap, d.Key, vsphere.AllocatedAreas)
		switch {
		case err == nil:
			in.Allocated = toDedup(alloc)
			if in.Allocated == nil {
				in.Allocated = []dedup.Extent{} // nothing allocated: read nothing
			}
			rep.Mode = ModeAllocated
		case ctx.Err() != nil:
			return repository.NewDisk{}, rep, nil, ctx.Err()
		default:
			warns = append(warns, fmt.Sprintf("disk %d (%s): allocated areas unavailable (%v): reading the whole disk", d.Key, d.Label, err))
		}
	}
	if rep.Mode == "" {
		rep.Mode = ModeFull
	}
	if reason != "" {
		rep.Reason = reason
		warns = append(warns, fmt.Sprintf("disk %d (%s): not incremental: %s; %s read", d.Key, d.Label, reason, rep.Mode))
	}

	// Scattered extents are read ahead in parallel: one at a time they are
	// a round trip each.
	var plan []dedup.Extent
	if in.Parent != nil {
		// Touching CBT areas are one read: the chunker reads a changed run
		// (cut with CDC when long) or a window piece across their edges.
		plan = extent.Normalize(in.Parent.Changed, extent.NoLimit)
	} else {
		plan = in.Allocated
	}
	mode := rep.Mode
	var staged int64 // NFC stream bytes received before the chunker ran
	write := func(src DiskSource) (*DiskResult, error) {
		if c, ok := src.(io.Closer); ok {
			defer c.Close()
		}
		if len(sample) > 0 {
			vr, err := verifyBlocks(dctx, safeReader{src}, safeReader{parentR}, sample)
			if err != nil {
				return nil, fmt.Errorf("CBT verification: %w", err)
			}
			rep.VerifiedBlocks, rep.MismatchedBlocks = vr.Blocks, vr.Mismatched
			if vr.Mismatched > 0 {
				return nil, fmt.Errorf("%w: %d of %d sampled blocks differ from the parent, the first at offset %d",
					ErrCBTMismatch, vr.Mismatched, vr.Blocks, vr.First)
			}
		}
		pctx, pcancel := context.WithCancel(dctx)
		pf := newPrefetchReader(pctx, src, plan)
		defer func() {
			pcancel() // a stalled read must not hold Close
			pf.Close()
		}()
		in.Source = safeReader{pf}
		return WriteDisk(pctx, safeStore{sess}, chunker, in, Options{
			Workers: e.opts.Workers, InFlight: e.opts.InFlight, ProgressEvery: e.opts.ProgressEvery,
			Progress: func(p Progress) {
				p.BytesRead += staged // monotonic across the staging phase
				progress(p, mode)
			},
		})
	}
	// CBT still decides what an NFC export keeps: the stream is read whole
	// but only the planned extents are staged.
	// The verification sample is kept too.
	var keep []vsphere.Extent
	if plan != nil {
		kp := plan
		if len(sample) > 0 {
			kp = unionExtents(plan, sample)
		}
		keep = make([]vsphere.Extent, len(kp))
		for i, x := range kp {
			keep[i] = vsphere.Extent{Offset: x.Offset, Length: x.Length}
		}
	}
	export := func(why error) (*DiskResult, error) {
		ex, ok := e.vs.(DiskExporter)
		if !ok {
			if why == nil {
				return nil, &sourceError{errors.New("NFC export is not available")}
			}
			return nil, &sourceError{fmt.Errorf("open: %w (and no NFC export available)", why)}
		}
		if why == nil {
			why = errors.New("the job's transport is nfc")
		}
		started := time.Now()
		var src DiskSource
		var err error
		// A dropped stream or a transient lease fault is worth one more
		// export: the failed one aborted its lease, nothing was staged. A
		// stream cut short reads as a truncated (corrupt) VMDK: a real
		// corruption fails the second export the same way.
		for attempt := 1; ; attempt++ {
			src, err = ex.ExportDisk(dctx, snap, d.Key, keep, e.opts.ExportDir, func(n int64) {
				staged = n
				progress(Progress{Size: d.CapacityBytes, BytesRead: n, Elapsed: time.Since(started)}, mode)
			})
			if err == nil || attempt >= 2 || ctx.Err() != nil || !(vsphere.IsTransient(err) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, vmdk.ErrCorrupt)) {
				break
			}
			warns = append(warns, fmt.Sprintf("disk %d (%s): NFC export failed (%v): exporting again", d.Key, d.Label, err))
		}
		if err != nil {
			return nil, fmt.Errorf("NFC export (the datastore read failed: %v): %w", why, err)
		}
		rep.Reader = ReaderNFC
		warns = append(warns, fmt.Sprintf("disk %d (%s): read through NFC export: %v", d.Key, d.Label, why))
		return write(src)
	}
	var detachErr error
	hotadd := func() (*DiskResult, error) {
		ha, ok := e.vs.(HotAddOpener)
		if !ok {
			return nil, &sourceError{fmt.Errorf("%w: the appliance is not set up for HotAdd (not a VM of this vCenter, or no appliance VM configured)",
				vsphere.ErrHotAddUnavailable)}
		}
		src, err := ha.HotAddDisk(dctx, snap, d.Key)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &sourceError{fmt.Errorf("open: %w", err)}
		}
		rep.Reader = ReaderHotAdd
		return write(markedSource{DiskSource: src, closeErr: &detachErr})
	}
	network := func() (*DiskResult, error) {
		src, err := e.vs.OpenDisk(dctx, snap, d.Key)
		switch {
		case errors.Is(err, vsphere.ErrNeedsExport):
			return nil, &sourceError{err}
		case err != nil:
			return nil, fmt.Errorf("open: %w", err)
		}
		rep.Reader = ReaderDatastore
		return write(markedSource{DiskSource: src})
	}
	// fallible: the transport failed in a way the next one may not.
	fallible := func(tr Transport, err error) bool {
		switch tr {
		case TransportHotAdd:
			var se *sourceError
			return errors.As(err, &se)
		case TransportNetwork:
			// The file service refused or cannot serve the extent (403/404,
			// vSAN/vVols, a delta chain): chunks already stored are
			// deduplicated by the next pass.
			return errors.Is(err, vsphere.ErrNeedsExport) || errors.Is(err, vsphere.ErrNotServed)
		}
		var se *sourceError
		return errors.As(err, &se)
	}
	read := func() (*DiskResult, error) {
		order := e.transportOrder(dp.transport)
		var reasons []string
		var last error
		for i, tr := range order {
			var out *DiskResult
			var err error
			switch tr {
			case TransportHotAdd:
				out, err = hotadd()
			case TransportNetwork:
				out, err = network()
			default:
				out, err = export(last)
			}
			if err == nil {
				if len(reasons) > 0 {
					rep.TransportReason = strings.Join(append(reasons, string(tr)), " -> ")
					warns = append(warns, fmt.Sprintf("disk %d (%s): transport fallback: %s", d.Key, d.Label, rep.TransportReason))
				}
				return out, nil
			}
			if ctx.Err() != nil || errors.Is(err, ErrCBTMismatch) || !fallible(tr, err) {
				return nil, err
			}
			if i == len(order)-1 {
				if len(order) == 1 {
					return nil, fmt.Errorf("%w: transport %s only: %w", ErrTransport, tr, err)
				}
				return nil, fmt.Errorf("%w: %s -> %s: %w", ErrTransport, strings.Join(reasons, " -> "), tr, err)
			}
			reasons = append(reasons, fmt.Sprintf("%s: %s", tr, shortReason(err)))
			last = err
		}
		return nil, fmt.Errorf("%w: no transport to try", ErrTransport)
	}
	out, err := read()
	if errors.Is(err, ErrCBTMismatch) && ctx.Err() == nil {
		// CBT lied: this point must not inherit the parent's stale blocks.
		warns = append(warns, fmt.Sprintf("disk %d (%s): CBT verification failed: %v; CBT missed writes on this disk: reading it whole (and again at the next backup)",
			d.Key, d.Label, err))
		rep.Reason = fmt.Sprintf("CBT verification found %d of %d sampled unchanged blocks changed", rep.MismatchedBlocks, rep.VerifiedBlocks)
		in.Parent, in.Allocated, plan, keep, sample = nil, nil, nil, nil, nil
		rep.Mode, mode = ModeFull, ModeFull
		out, err = read()
	}
	if detachErr != nil {
		warns = append(warns, fmt.Sprintf("disk %d (%s): %v", d.Key, d.Label, detachErr))
	}
	if err != nil {
		return repository.NewDisk{}, rep, nil, err
	}
	root, err := sess.PutDisk(ctx, d.CapacityBytes, out.Extents)
	if err != nil {
		return repository.NewDisk{}, rep, nil, fmt.Errorf("store disk map: %w", err)
	}
	rep.BytesRead, rep.ParentBytesRead, rep.NewBytes = out.BytesRead, out.ParentBytesRead, out.NewBytes
	rep.StoredBytes, rep.ZeroBytes, rep.ReusedBytes, rep.Duration = out.StoredBytes, out.ZeroBytes, out.ReusedBytes, out.Duration
	rep.Method, rep.CompactedWindows = out.Method, out.Slices.CompactWindows
	var allocated int64
	if in.Allocated != nil {
		for _, a := range in.Allocated {
			allocated += a.Length
		}
	}
	nd := repository.NewDisk{Key: d.Key, Label: d.Label, Capacity: d.CapacityBytes, Map: root, ChangeID: d.ChangeID,
		Stats: repository.DiskStats{LogicalBytes: d.CapacityBytes, AllocatedBytes: allocated, BytesRead: out.BytesRead,
			NewBytes: out.NewBytes, StoredBytes: out.StoredBytes, Mode: rep.Mode}}
	return nd, rep, warns, nil
}

// parentDisk finds the disk with the given device key in the parent.
func parentDisk(p *repository.Point, key int32) (int, repository.Disk, bool) {
	if p == nil {
		return 0, repository.Disk{}, false
	}
	for i, d := range p.Disks {
		if d.Key == key {
			return i, d, true
		}
	}
	return 0, repository.Disk{}, false
}

// toDedup converts vSphere extents to the chunker's, normalised (CBT
// answers are, but a VSphere implementation need not be).
func toDedup(in []vsphere.Extent) []dedup.Extent {
	out := make([]dedup.Extent, len(in))
	for i, e := range in {
		out[i] = dedup.Extent(e)
	}
	return extent.Normalize(out, extent.NoLimit)
}

func vmMode(disks []DiskReport) string {
	mode := ModeFull
	for _, d := range disks {
		switch d.Mode {
		case ModeIncremental:
			return ModeIncremental
		case ModeAllocated:
			mode = ModeAllocated
		}
	}
	return mode
}

// safeReader turns a panic in a disk read (on a pipeline goroutine, where
// it would kill the process) into an error, so the snapshot is still removed.
type safeReader struct{ r io.ReaderAt }

func (s safeReader) ReadAt(p []byte, off int64) (n int, err error) {
	defer func() {
		if v := recover(); v != nil {
			n, err = 0, fmt.Errorf("%w: read at %d: %v", ErrPanic, off, v)
		}
	}()
	return s.r.ReadAt(p, off)
}

// safeStore does the same for the pipeline's workers.
type safeStore struct{ s ChunkStore }

func (s safeStore) PutChunk(ctx context.Context, data []byte) (id repository.ID, added bool, stored int, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: store chunk: %v", ErrPanic, v)
		}
	}()
	return s.s.PutChunk(ctx, data)
}

// BlobSizes forwards to the session when it can tell blob lengths (the
// incremental planner's use rule needs them for slices).
func (s safeStore) BlobSizes(ctx context.Context, ids []repository.ID) ([]int64, error) {
	if bs, ok := s.s.(blobSizer); ok {
		return bs.BlobSizes(ctx, ids)
	}
	return nil, errNoBlobSizes
}

// progressAgg folds the disks' progress into the VM's.
type progressAgg struct {
	mu    sync.Mutex
	fn    func(VMProgress)
	start time.Time
	p     VMProgress
}

func (a *progressAgg) init(disks []vsphere.Disk) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.p.Disks = make([]DiskProgress, len(disks))
	for i, d := range disks {
		a.p.Disks[i] = DiskProgress{Key: d.Key, Progress: Progress{Size: d.CapacityBytes}}
	}
}

func (a *progressAgg) phase(ph string) {
	if a.fn == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.p.Phase = ph
	a.emit()
}

func (a *progressAgg) disk(i int, p Progress, mode string) {
	if a.fn == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.p.Disks[i] = DiskProgress{Key: a.p.Disks[i].Key, Mode: mode, Progress: p}
	a.emit()
}

// emit runs under a.mu, so the callback is never called concurrently.
func (a *progressAgg) emit() {
	p := a.p
	p.Disks = append([]DiskProgress(nil), a.p.Disks...)
	p.Size, p.Done, p.BytesRead, p.NewBytes = 0, 0, 0, 0
	for _, d := range p.Disks {
		p.Size += d.Size
		p.Done += d.Done
		p.BytesRead += d.BytesRead
		p.NewBytes += d.NewBytes
	}
	p.Elapsed = time.Since(a.start)
	a.fn(p)
}
