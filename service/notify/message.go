package notify

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"
)

// Message is one mail. The Sender adds Date, Message-ID, From and MIME
// headers.
type Message struct {
	To      []string // nil: the Sender's default recipients
	Subject string
	Text    string // the text/plain body; required
	HTML    string // the text/html alternative; "" sends text/plain only
	// Kind ("alert", "daily", "test") goes into the X-Vmvault-Report header
	// so that mail rules need not parse subjects.
	Kind string
}

// maxSubjectRunes keeps the Subject header far below the 998-byte line limit.
const maxSubjectRunes = 200

// compose renders m as an RFC 5322 message with CRLF line ends.
func compose(m Message, from *mail.Address, to []*mail.Address, now time.Time) ([]byte, error) {
	if m.Text == "" {
		return nil, fmt.Errorf("empty body")
	}
	var b bytes.Buffer
	hdr := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	hdr("Date", now.Format(time.RFC1123Z))
	hdr("From", from.String())
	tos := make([]string, len(to))
	for i, a := range to {
		tos[i] = a.String()
	}
	hdr("To", strings.Join(tos, ", "))
	hdr("Subject", encodeHeader(m.Subject))
	hdr("Message-ID", messageID(from.Address))
	hdr("MIME-Version", "1.0")
	// RFC 3834: no vacation auto-replies to a machine's reports.
	hdr("Auto-Submitted", "auto-generated")
	hdr("X-Auto-Response-Suppress", "All")
	if m.Kind != "" {
		hdr("X-Vmvault-Report", oneLine(m.Kind))
	}
	textPart := textproto.MIMEHeader{"Content-Type": {"text/plain; charset=utf-8"}, "Content-Transfer-Encoding": {"quoted-printable"}}
	if m.HTML == "" {
		for k, v := range textPart {
			hdr(k, v[0])
		}
		b.WriteString("\r\n")
		if err := writeQP(&b, m.Text); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	hdr("Content-Type", mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()}))
	b.WriteString("\r\n")
	// Parts from plainest to richest (RFC 2046 5.1.4): clients show the last
	// one they can render.
	for _, p := range []struct {
		ctype, content string
	}{{"text/plain; charset=utf-8", m.Text}, {"text/html; charset=utf-8", m.HTML}} {
		pw, err := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {p.ctype}, "Content-Transfer-Encoding": {"quoted-printable"}})
		if err != nil {
			return nil, err
		}
		if err := writeQP(pw, p.content); err != nil {
			return nil, err
		}
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	b.Write(body.Bytes())
	return b.Bytes(), nil
}

type writer interface{ Write([]byte) (int, error) }

func writeQP(w writer, s string) error {
	qp := quotedprintable.NewWriter(w)
	if _, err := qp.Write([]byte(s)); err != nil {
		return err
	}
	return qp.Close()
}

// oneLine removes what could end a header line (header injection through a
// VM or job name).
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\r' || r == '\n' || r == 0 }), " ")
}

// encodeHeader returns s on one line, at most maxSubjectRunes runes, as an
// RFC 2047 encoded word when it is not plain ASCII.
func encodeHeader(s string) string {
	s = strings.ToValidUTF8(oneLine(s), "\uFFFD")
	if utf8.RuneCountInString(s) > maxSubjectRunes {
		s = string([]rune(s)[:maxSubjectRunes-1]) + "…"
	}
	return mime.QEncoding.Encode("utf-8", s)
}

func messageID(from string) string {
	domain := "vmvault.invalid"
	if i := strings.LastIndexByte(from, '@'); i >= 0 && i+1 < len(from) {
		domain = from[i+1:]
	}
	var r [16]byte
	_, _ = rand.Read(r[:])
	return "<" + hex.EncodeToString(r[:]) + "@" + domain + ">"
}
