package vsphere

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"
)

// ReaderOptions tune a DiskReader.
type ReaderOptions struct {
	// Parallel is the number of range GETs one ReadAt runs at once (default 4).
	Parallel int
	// ChunkSize is the most one GET asks for (default 4 MiB).
	ChunkSize int64
	// RequestTimeout bounds one GET attempt, so a stalled transfer is retried
	// (default 2 min).
	RequestTimeout time.Duration
	// Progress, if set, is called with the bytes of each completed GET. It
	// may be called from several goroutines at once.
	Progress func(n int64)
}

// DiskReader reads a snapshotted disk's frozen base flat extent through the
// datastore file service with HTTP Range requests. It implements io.ReaderAt
// and is safe for concurrent use; ReadAt uses the context given to OpenDisk.
type DiskReader struct {
	c    *Client
	ctx  context.Context
	u    *url.URL
	path string
	size int64
	opts ReaderOptions
}

// OpenDisk prepares a reader over the disk with the given key as frozen by
// snap. Disks that cannot be read this way (independent, physical RDM,
// encrypted) give an *UnsupportedDiskError; disks only NFC export can read
// (vSAN/vVols, a VM with older snapshots under ours) give ErrNeedsExport.
func (c *Client) OpenDisk(ctx context.Context, snap *Snapshot, diskKey int32, opts ReaderOptions) (*DiskReader, error) {
	d, ok := snap.Disk(diskKey)
	if !ok {
		return nil, fmt.Errorf("open disk %d of %s: %w", diskKey, snap.VM.Name, ErrNotFound)
	}
	unsupported := func(reason string) error {
		return &UnsupportedDiskError{VM: snap.VM.Name, Disk: diskKey, Reason: reason}
	}
	if d.Unsupported != "" {
		return nil, unsupported(d.Unsupported)
	}
	// Our snapshot's disk is a delta whose parent is the base (depth 1); a
	// deeper chain means older snapshots hold part of the data.
	if d.ChainDepth > 1 || snap.Parent != "" {
		return nil, fmt.Errorf("open disk %d of %s: the VM had snapshots before ours, the frozen data spans a delta chain: %w",
			diskKey, snap.VM.Name, ErrNeedsExport)
	}
	var dp object.DatastorePath
	if !dp.FromString(d.BaseFileName) {
		return nil, fmt.Errorf("open disk %d of %s: bad backing file name %q", diskKey, snap.VM.Name, d.BaseFileName)
	}
	var v mo.VirtualMachine
	if err := c.retrieveOne(ctx, vmMoRef(snap.VM), []string{"layoutEx", "datastore"}, &v); err != nil {
		return nil, fmt.Errorf("open disk %d of %s: %w", diskKey, snap.VM.Name, err)
	}
	if len(v.Datastore) > 0 {
		spec := types.PropertyFilterSpec{PropSet: []types.PropertySpec{{Type: "Datastore", PathSet: []string{"name", "summary.type"}}}}
		for _, r := range v.Datastore {
			spec.ObjectSet = append(spec.ObjectSet, types.ObjectSpec{Obj: r})
		}
		ocs, err := c.retrieve(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("open disk %d of %s: datastores: %w", diskKey, snap.VM.Name, err)
		}
		var dss []mo.Datastore
		if err := mo.LoadObjectContent(ocs, &dss); err != nil {
			return nil, fmt.Errorf("open disk %d of %s: datastores: %w", diskKey, snap.VM.Name, err)
		}
		for _, ds := range dss {
			if ds.Name == dp.Datastore {
				switch strings.ToLower(ds.Summary.Type) {
				case "vsan", "vvol":
					return nil, fmt.Errorf("open disk %d of %s: datastore %s is %s, no flat extent over the file service: %w",
						diskKey, snap.VM.Name, ds.Name, ds.Summary.Type, ErrNeedsExport)
				}
			}
		}
	}
	flat := flatExtent(v.LayoutEx, diskKey, d.BaseFileName)
	var fp object.DatastorePath
	if !fp.FromString(flat) {
		return nil, fmt.Errorf("open disk %d of %s: bad extent name %q", diskKey, snap.VM.Name, flat)
	}
	anc, err := mo.Ancestors(ctx, c.vim, c.vim.ServiceContent.PropertyCollector, vmMoRef(snap.VM))
	if err != nil {
		return nil, mapFault("open disk: datacenter of "+snap.VM.Name, err)
	}
	var dcPath []string
	for _, a := range anc {
		if a.Self == c.vim.ServiceContent.RootFolder {
			continue
		}
		dcPath = append(dcPath, a.Name)
		if a.Self.Type == "Datacenter" {
			break
		}
	}
	u := c.datastoreURL(strings.Join(dcPath, "/"), fp.Datastore, fp.Path)
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = 4 << 20
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 2 * time.Minute
	}
	return &DiskReader{c: c, ctx: ctx, u: u, path: flat, size: d.CapacityBytes, opts: opts}, nil
}

// flatExtent finds the extent file of the chain level whose descriptor is
// base in layoutEx, falling back to VMware's "<name>-flat.vmdk" convention.
func flatExtent(l *types.VirtualMachineFileLayoutEx, key int32, base string) string {
	fallback := strings.TrimSuffix(base, ".vmdk") + "-flat.vmdk"
	if l == nil {
		return fallback
	}
	files := map[int32]types.VirtualMachineFileLayoutExFileInfo{}
	for _, f := range l.File {
		files[f.Key] = f
	}
	for _, dl := range l.Disk {
		if dl.Key != key {
			continue
		}
		for _, ch := range dl.Chain {
			isBase := false
			for _, k := range ch.FileKey {
				if f := files[k]; f.Name == base {
					isBase = true
				}
			}
			if !isBase {
				continue
			}
			for _, k := range ch.FileKey {
				if f := files[k]; f.Type == string(types.VirtualMachineFileLayoutExFileTypeDiskExtent) {
					return f.Name
				}
			}
		}
	}
	return fallback
}

func (c *Client) datastoreURL(dcPath, ds, p string) *url.URL {
	u := &url.URL{Scheme: c.url.Scheme, Host: c.url.Host, Path: "/folder/" + p}
	q := url.Values{}
	q.Set("dcPath", dcPath)
	q.Set("dsName", ds)
	u.RawQuery = q.Encode()
	return u
}

// Size is the disk's capacity in bytes.
func (r *DiskReader) Size() int64 { return r.size }

// Path is the datastore path of the extent being read ("[ds] vm/disk-flat.vmdk").
func (r *DiskReader) Path() string { return r.path }

// ReadAt reads len(p) bytes at off with parallel range GETs; it returns
// io.EOF when the read reaches the end of the disk.
func (r *DiskReader) ReadAt(p []byte, off int64) (int, error) {
	return r.ReadAtContext(r.ctx, p, off)
}

// ReadAtContext is ReadAt with its own context.
func (r *DiskReader) ReadAtContext(ctx context.Context, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("read %s: negative offset %d", r.path, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	var eof error
	if rem := r.size - off; int64(len(p)) > rem {
		p, eof = p[:rem], io.EOF
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Parallel)
	for start := int64(0); start < int64(len(p)); start += r.opts.ChunkSize {
		end := min(start+r.opts.ChunkSize, int64(len(p)))
		g.Go(func() error { return r.fetch(gctx, p[start:end], off+start) })
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	return len(p), eof
}

// fetch fills p from off, resuming after a dropped transfer and retrying
// transient failures under the client's one retry policy.
func (r *DiskReader) fetch(ctx context.Context, p []byte, off int64) error {
	got := 0
	relogged := false
	for attempt := 1; ; attempt++ {
		gen := r.c.loginGen.Load()
		n, err := r.get(ctx, p[got:], off+int64(got))
		got += n
		if got == len(p) {
			if r.opts.Progress != nil {
				r.opts.Progress(int64(len(p)))
			}
			return nil
		}
		if errors.Is(err, errPartial) && n > 0 {
			attempt = 0 // progress: not a failure
			continue
		}
		if err == nil {
			err = errShortBody
		}
		if ctx.Err() != nil {
			return fmt.Errorf("read %s at %d: %w", r.path, off, ctx.Err())
		}
		var se *httpStatusError
		if errors.As(err, &se) && (se.code == http.StatusUnauthorized || se.code == http.StatusForbidden) && !relogged {
			relogged = true
			// The file service shares the SOAP session: a 403 while that
			// session is alive is about the file (vSAN, vVols, a
			// permission), and logging out and in again would only break
			// every other call in flight on the session. A 401 can come
			// with a live SOAP session whose file-service ticket expired,
			// so it always re-logs in.
			if se.code == http.StatusForbidden && r.c.sessionActive(ctx) {
				return fmt.Errorf("read %s at %d: %w: %w", r.path, off+int64(got), ErrNotServed, err)
			}
			if lerr := r.c.relogin(ctx, gen); lerr != nil {
				return fmt.Errorf("read %s at %d: %w", r.path, off, lerr)
			}
			attempt--
			continue
		}
		if errors.As(err, &se) && (se.code == http.StatusUnauthorized || se.code == http.StatusForbidden) {
			return fmt.Errorf("read %s at %d: %w: %w", r.path, off+int64(got), ErrNotServed, err)
		}
		if !transient(err) {
			return fmt.Errorf("read %s at %d: %w", r.path, off+int64(got), err)
		}
		if attempt >= r.c.retry.Attempts {
			return fmt.Errorf("read %s at %d: %w after %d attempts: %w", r.path, off+int64(got), ErrTransient, attempt, err)
		}
		r.c.retries.Add(1)
		if berr := r.c.retry.backoff(ctx, attempt); berr != nil {
			return fmt.Errorf("read %s at %d: %w", r.path, off, berr)
		}
	}
}

// get does one range GET into p and returns how many bytes of p are valid.
// Bytes past the end of a flat file shorter than the disk read as zeros.
func (r *DiskReader) get(ctx context.Context, p []byte, off int64) (int, error) {
	actx, cancel := context.WithTimeout(ctx, r.opts.RequestTimeout)
	defer cancel()
	last := off + int64(len(p)) - 1
	r.c.rangeGets.Add(1)
	res, err := r.c.sc.DownloadRequest(actx, r.u, &soap.Download{
		Method:  http.MethodGet,
		Headers: map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", off, last)},
	})
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var want int
	switch res.StatusCode {
	case http.StatusPartialContent:
		cr := res.Header.Get("Content-Range")
		start, end, err := parseContentRange(cr)
		if err != nil {
			return 0, err
		}
		if start != off || end > last || end < start {
			return 0, fmt.Errorf("asked for bytes %d-%d, server sent Content-Range %q", off, last, cr)
		}
		want = int(end - start + 1)
		if end < last && !endsFile(cr, end) {
			// The server sent less than asked (a range cap), not EOF.
			n, err := io.ReadFull(res.Body, p[:want])
			r.c.bytesRead.Add(int64(n))
			if err == nil {
				err = errPartial
			}
			return n, err
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// The flat file ends before off: a thin file not grown to capacity.
		clear(p)
		return len(p), nil
	case http.StatusOK:
		return 0, fmt.Errorf("server ignored the Range header (200 instead of 206)")
	case http.StatusNotFound:
		return 0, fmt.Errorf("%s: %w: %w", r.path, ErrNotServed, ErrNotFound)
	default:
		return 0, &httpStatusError{code: res.StatusCode, status: res.Status, url: r.path, detail: bodyDetail(res.Body)}
	}
	n, err := io.ReadFull(res.Body, p[:want])
	r.c.bytesRead.Add(int64(n))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	clear(p[want:])
	return len(p), nil
}

// endsFile reports whether Content-Range "bytes a-end/total" reaches the
// end of the file (total unknown counts as not).
func endsFile(cr string, end int64) bool {
	_, total, ok := strings.Cut(cr, "/")
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return err == nil && n == end+1
}

// errPartial: a range answer shorter than asked, to be continued at once.
var errPartial = errors.New("partial range")

// parseContentRange parses "bytes 8-23/1048576".
func parseContentRange(s string) (start, end int64, err error) {
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", s)
	}
	rng, _, _ := strings.Cut(rest, "/")
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, fmt.Errorf("bad Content-Range %q", s)
	}
	if start, err = strconv.ParseInt(a, 10, 64); err != nil || start < 0 {
		return 0, 0, fmt.Errorf("bad Content-Range %q", s)
	}
	if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
		return 0, 0, fmt.Errorf("bad Content-Range %q", s)
	}
	return start, end, nil
}
