package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/vmvault/vmvault/guestfs"
	"github.com/vmvault/vmvault/policy"
	"github.com/vmvault/vmvault/service/filerestore/catalog"
)

// FileService is file-level restore: browse, read and search files inside
// restore points; filerestore.Service implements it. A nil FileService
// makes the file routes answer 501.
type FileService interface {
	// Volumes lists the volumes of a point (id or unique prefix).
	Volumes(ctx context.Context, point string) ([]guestfs.Volume, error)
	// ReadDir returns entries [offset, offset+limit) of a directory in name
	// order (limit 0: all), the directory's entry count, and the entries
	// left out because no path can name them (guestfs.UnsafeName).
	ReadDir(ctx context.Context, point, volume, dir string, offset, limit int) ([]guestfs.Entry, int, []guestfs.Skipped, error)
	// Stat describes a path, following links inside the volume.
	Stat(ctx context.Context, point, volume, name string) (guestfs.Entry, error)
	// OpenFile opens a regular file for random access; the caller closes it.
	OpenFile(ctx context.Context, point, volume, name string) (guestfs.File, error)
	// WriteArchive streams paths (directories with their contents) as a
	// "zip" or "tar" archive.
	WriteArchive(ctx context.Context, w io.Writer, format, point, volume string, paths []string) error
	// Search finds paths in the file catalogs of every point.
	Search(ctx context.Context, q catalog.Query) (catalog.Result, error)
}

// EventKindFileDownload is the audit event of every file download.
const EventKindFileDownload = "file.download"

// Listing pages: the default and the most entries one page holds.
const (
	filesDefaultLimit = 1000
	filesMaxLimit     = 10000
)

// FileListing is GET .../files: one page of a directory.
type FileListing struct {
	Path       string          `json:"path"`
	Entries    []guestfs.Entry `json:"entries"`
	Total      int             `json:"total"`
	Offset     int             `json:"offset"`
	Limit      int             `json:"limit"`
	NextOffset *int            `json:"nextOffset"` // null on the last page
	// Skipped: entries of a hostile image whose names no path can name
	// ("..", a "/" or a NUL inside), on every page; not in Entries or
	// Total, never downloaded or restored.
	Skipped []guestfs.Skipped `json:"skipped"`
}

func (s *Server) files() (FileService, error) {
	if s.cfg.Files == nil {
		return nil, fmt.Errorf("file-level restore: %w", ErrNotImplemented)
	}
	return s.cfg.Files, nil
}

// filesPoint is the file service and the restore point id a files route
// names.
func (s *Server) filesPoint(c *gin.Context) (FileService, string, error) {
	fsvc, err := s.files()
	if err != nil {
		return nil, "", err
	}
	id, err := pointID(c)
	if err != nil {
		return nil, "", err
	}
	return fsvc, id, nil
}

// filesVolume is filesPoint and the volume id of a route under a volume.
func (s *Server) filesVolume(c *gin.Context) (FileService, string, string, error) {
	fsvc, id, err := s.filesPoint(c)
	if err != nil {
		return nil, "", "", err
	}
	vol, err := volumeParam(c)
	if err != nil {
		return nil, "", "", err
	}
	return fsvc, id, vol, nil
}

// filesError maps file-level restore errors to statuses; the rest go
// through mapError.
func filesError(err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return err
	}
	type rule struct {
		target error
		status int
		code   string
	}
	for _, r := range []rule{
		{guestfs.ErrBadPath, http.StatusBadRequest, "bad_path"},
		{catalog.ErrBadPattern, http.StatusBadRequest, "bad_pattern"},
		{guestfs.ErrNoVolume, http.StatusNotFound, "not_found"},
		{guestfs.ErrNotExist, http.StatusNotFound, "not_found"},
		{guestfs.ErrNotBrowsable, http.StatusConflict, "not_browsable"},
		{guestfs.ErrNotDir, http.StatusBadRequest, "not_a_directory"},
		{guestfs.ErrIsDir, http.StatusBadRequest, "is_a_directory"},
		{guestfs.ErrNotRegular, http.StatusBadRequest, "not_a_regular_file"},
		{guestfs.ErrLinkLoop, http.StatusUnprocessableEntity, "damaged"},
		{guestfs.ErrCorrupt, http.StatusUnprocessableEntity, "damaged"},
	} {
		if errors.Is(err, r.target) {
			return &apiError{status: r.status, code: r.code, msg: err.Error()}
		}
	}
	return err
}

func volumeParam(c *gin.Context) (string, error) {
	v := c.Param("vol")
	if v == "" || len(v) > 256 || strings.ContainsAny(v, "/\x00") {
		return "", badRequest("vol", "a volume id, as GET .../volumes lists it")
	}
	return v, nil
}

func intParam(c *gin.Context, name string, def, lo, hi int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name, "want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func (s *Server) listVolumes(c *gin.Context) (any, error) {
	fsvc, id, err := s.filesPoint(c)
	if err != nil {
		return nil, err
	}
	vols, err := fsvc.Volumes(c.Request.Context(), id)
	if err != nil {
		return nil, filesError(err)
	}
	if vols == nil {
		vols = []guestfs.Volume{}
	}
	return vols, nil
}

func (s *Server) listFiles(c *gin.Context) (any, error) {
	fsvc, id, vol, err := s.filesVolume(c)
	if err != nil {
		return nil, err
	}
	offset, err := intParam(c, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	limit, err := intParam(c, "limit", filesDefaultLimit, 1, filesMaxLimit)
	if err != nil {
		return nil, err
	}
	p := c.DefaultQuery("path", "/")
	clean, err := guestfs.CleanPath(p)
	if err != nil {
		return nil, filesError(fmt.Errorf("path %q: %w", p, err))
	}
	ents, total, skipped, err := fsvc.ReadDir(c.Request.Context(), id, vol, clean, offset, limit)
	if err != nil {
		return nil, filesError(err)
	}
	if ents == nil {
		ents = []guestfs.Entry{}
	}
	if skipped == nil {
		skipped = []guestfs.Skipped{}
	}
	l := FileListing{Path: "/" + strings.TrimPrefix(clean, "."), Entries: ents, Total: total, Offset: offset, Limit: limit, Skipped: skipped}
	if next := offset + len(ents); next < total {
		l.NextOffset = &next
	}
	return l, nil
}

// getContent serves one file's bytes (Range, Content-Length, a filename)
// or, for a directory, several paths or format=zip|tar, a streamed archive.
// Every download is an audit event naming who, which point and which paths.
func (s *Server) getContent(c *gin.Context) (any, error) {
	fsvc, id, vol, err := s.filesVolume(c)
	if err != nil {
		return nil, err
	}
	paths := c.QueryArray("path")
	if len(paths) == 0 {
		return nil, badRequest("path", "give the path of a file or directory (repeat path= for a selection)")
	}
	if len(paths) > 10000 {
		return nil, badRequest("path", "at most 10000 paths")
	}
	format := c.Query("format")
	if format != "" && format != "zip" && format != "tar" {
		return nil, badRequest("format", "format is zip or tar")
	}
	ctx := c.Request.Context()
	// The point is resolved once, so that the event names its full id and VM.
	rp, err := s.cfg.Points.Point(ctx, id)
	if err != nil {
		return nil, err
	}
	var cleaned []string
	for _, p := range paths {
		cp, err := guestfs.CleanPath(p)
		if err != nil {
			return nil, filesError(fmt.Errorf("path %q: %w", p, err))
		}
		cleaned = append(cleaned, cp)
	}
	// Every path is checked before the first byte goes out: a bad one is a
	// JSON error, not a truncated archive.
	var first guestfs.Entry
	for i, p := range cleaned {
		e, err := fsvc.Stat(ctx, rp.ID, vol, p)
		if err != nil {
			return nil, filesError(err)
		}
		if i == 0 {
			first = e
		}
	}
	if format == "" && len(cleaned) == 1 && first.Type == "file" {
		f, err := fsvc.OpenFile(ctx, rp.ID, vol, cleaned[0])
		if err != nil {
			return nil, filesError(err)
		}
		defer f.Close()
		s.auditDownload(c, rp, vol, cleaned, "", nil)
		name := path.Base(cleaned[0])
		h := c.Writer.Header()
		// Never rendered: a restored .html or .js must not run in the
		// console's origin (octet-stream + nosniff + attachment).
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Disposition", attachment(name))
		http.ServeContent(c.Writer, c.Request, name, first.Mtime, io.NewSectionReader(f, 0, f.Size()))
		return nil, nil
	}
	if format == "" {
		format = "zip"
	}
	if len(cleaned) == 1 && first.Type != "dir" && first.Type != "file" && first.Type != "symlink" {
		return nil, filesError(fmt.Errorf("%s: %w", paths[0], guestfs.ErrNotRegular))
	}
	base := "files"
	if len(cleaned) == 1 && cleaned[0] != "." {
		base = path.Base(cleaned[0])
	} else if len(cleaned) == 1 {
		base = rp.VM.Name + "-" + vol
	}
	h := c.Writer.Header()
	if format == "zip" {
		h.Set("Content-Type", "application/zip")
	} else {
		h.Set("Content-Type", "application/x-tar")
	}
	h.Set("Content-Disposition", attachment(base+"."+format))
	c.Status(http.StatusOK)
	// Recorded when the archive ends: the event says whether the files
	// were restored or the download broke off.
	err = fsvc.WriteArchive(ctx, c.Writer, format, rp.ID, vol, cleaned)
	s.auditDownload(c, rp, vol, cleaned, format, err)
	if err != nil {
		// The status is sent: the client sees a truncated archive (a zip
		// without its directory, a tar without its end), and the log says why.
		s.cfg.Logger.Warn("file archive interrupted", "point", rp.ID, "volume", vol, "err", err)
		c.Abort()
		if ctx.Err() == nil {
			panic(http.ErrAbortHandler) // cut the connection: never a clean end
		}
	}
	return nil, nil
}

// attachment is a Content-Disposition with an ASCII fallback and the
// UTF-8 name (RFC 6266).
func attachment(name string) string {
	ascii := strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f || r == '"' || r == '\\' {
			return '_'
		}
		return r
	}, name)
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" && ascii == name {
		return v
	}
	return fmt.Sprintf(`attachment; filename="%s"; filename*=UTF-8''%s`, ascii, urlPathEscape(name))
}

func urlPathEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// auditDownload records who downloaded what in the event log (Config.Events
// when it can record: internal/state.DB) and the live stream.
func (s *Server) auditDownload(c *gin.Context, rp RestorePoint, vol string, paths []string, format string, failed error) {
	who := principal(c)
	shown := make([]string, 0, min(len(paths), 20))
	for i, p := range paths {
		if i == 20 {
			shown = append(shown, fmt.Sprintf("… and %d more", len(paths)-20))
			break
		}
		shown = append(shown, "/"+strings.TrimPrefix(p, "."))
	}
	what := "file"
	if format != "" {
		what = format + " archive of"
	}
	e := policy.Event{Time: s.now(), Severity: policy.SeverityInfo, Kind: EventKindFileDownload, Subject: who.User,
		VM: rp.VM.InstanceUUID, Repository: rp.Repository, User: who.User, Address: s.clientIP(c), Outcome: OutcomeOK,
		Message: fmt.Sprintf("%s (%s) downloaded %s %s from volume %s of restore point %s (%s, %s) from %s",
			who.User, who.Role, what, strings.Join(shown, ", "), vol, rp.ID, rp.VM.Name, rp.Time.UTC().Format("2006-01-02 15:04:05 UTC"), s.clientIP(c)),
		ObjectKind: "point", ObjectID: rp.ID, ObjectName: fmt.Sprintf("VM %s, %s", rp.VM.Name, rp.Time.UTC().Format("2006-01-02 15:04:05 UTC"))}
	if failed != nil {
		e.Outcome, e.Severity, e.Error = OutcomeFailed, policy.SeverityWarning, failed.Error()
		if c.Request.Context().Err() != nil {
			e.Error = "the client hung up: " + e.Error
		}
		e.Message += ": failed: " + e.Error
	}
	if rec, ok := s.cfg.Events.(interface {
		AddEvent(context.Context, policy.Event) error
	}); ok {
		if err := rec.AddEvent(context.WithoutCancel(c.Request.Context()), e); err != nil {
			s.cfg.Logger.Error("record the download event", "err", err)
		}
	} else {
		s.cfg.Logger.Info("download", "user", who.User, "point", rp.ID, "volume", vol, "paths", shown)
	}
	s.ObserveEvent(e)
}

func (s *Server) searchFiles(c *gin.Context) (any, error) {
	fsvc, err := s.files()
	if err != nil {
		return nil, err
	}
	q := catalog.Query{Pattern: c.Query("q"), VM: c.Query("vm")}
	if q.Pattern == "" {
		return nil, badRequest("q", "give a pattern: a substring of the path, or a glob (*.conf, /home/*/report.docx)")
	}
	if len(q.Pattern) > 1024 {
		return nil, badRequest("q", "pattern longer than 1024 bytes")
	}
	if q.Since, err = parseTimeParam(c, "since"); err != nil {
		return nil, err
	}
	if q.Limit, err = intParam(c, "limit", 1000, 1, 10000); err != nil {
		return nil, err
	}
	res, err := fsvc.Search(c.Request.Context(), q)
	if err != nil {
		return nil, filesError(err)
	}
	if res, err = s.filterSearch(c.Request.Context(), s.judge(c), res); err != nil {
		return nil, err
	}
	if res.Hits == nil {
		res.Hits = []catalog.Hit{}
	}
	return res, nil
}
