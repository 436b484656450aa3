package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/maiden-run/maiden/api"
	"github.com/maiden-run/maiden/internal/adminlink"
	"github.com/maiden-run/maiden/internal/store"
)

// This file is the audit trail's export for a SIEM: streamed a page at a
// time (the trail is never held whole), from a record number (resuming
// where the last export ended), as JSON lines (each record as stored) or
// as OCSF events (ocsf.go).

// Export formats (ExportOptions.Format).
const (
	ExportJSONL = "jsonl" // each record as stored, then the head line
	ExportOCSF  = "ocsf"  // each record as an OCSF event (OCSFVersion)
)

// ExportOptions say what ExportAuditStream writes; the zero value is the
// whole trail as JSON lines.
type ExportOptions struct {
	// Format is ExportJSONL ("" too) or ExportOCSF.
	Format string
	// From is the first record's sequence number; 0 or 1 means the first
	// record. A SIEM resumes with the head line's last + 1, and checks
	// that the first record's prev is the head it noted.
	From int64
	// Page is how many records are read at once; 0 means 1000 (a page
	// also ends once its bodies reach AuditPageBytes: AuditPage).
	Page int
}

// ExportHead is what the end of an export says: the chain's head as of the
// export's last record (its hash), the number of records written, the
// first and last sequence numbers and the prev of the first record (the
// hash of the record before From, or the chain's genesis), so a SIEM can
// check that a resumed export continues the one before.
type ExportHead struct {
	Head    string `json:"head"`
	Records int64  `json:"records"`
	From    int64  `json:"from,omitempty"`
	Last    int64  `json:"last,omitempty"`
	Prev    string `json:"prev,omitempty"`
}

// ExportAuditStream writes the trail's records from o.From up to the last
// record there was when it started (records appended meanwhile are the next
// export's), a page at a time, in o.Format; for JSON lines the last line
// is the ExportHead (VerifyExport checks a whole export, From 0). Records
// this process's audit journal holds are flushed into the chain first.
func (s *State) ExportAuditStream(ctx context.Context, w io.Writer, o ExportOptions) (ExportHead, error) {
	var enc func(r api.AuditRecord) ([]byte, error)
	switch o.Format {
	case "", ExportJSONL:
		enc = jsonlRecord
	case ExportOCSF:
		enc = OCSFEvent
	default:
		return ExportHead{}, fmt.Errorf("export audit: unknown format %q (jsonl or ocsf)", o.Format)
	}
	if o.From < 0 {
		return ExportHead{}, fmt.Errorf("export audit: from %d: must be 0 or more", o.From)
	}
	if j, ok := s.st.(interface{ Journal() *store.Journal }); ok && j.Journal() != nil {
		if err := j.Journal().Flush(ctx); err != nil {
			return ExportHead{}, fmt.Errorf("export audit: %w", err)
		}
	}
	last, err := lastAuditSeq(ctx, s.st)
	if err != nil {
		return ExportHead{}, fmt.Errorf("export audit: %w", err)
	}
	page := o.Page
	if page <= 0 {
		page = 1000
	}
	bw := bufio.NewWriter(w)
	h := ExportHead{Head: strings.Repeat("0", 64)} // the chain's genesis: nothing exported
	after := max(o.From-1, 0)
	for after < last {
		recs, err := s.st.AuditPage(ctx, after, page, AuditPageBytes)
		if err != nil {
			return h, fmt.Errorf("export audit: %w", err)
		}
		if len(recs) == 0 {
			break
		}
		for _, sr := range recs {
			if sr.Seq > last {
				break
			}
			r := adminlink.Audit(sr)
			if h.Records == 0 {
				h.From, h.Prev = r.Seq, r.Prev
			}
			b, err := enc(r)
			if err != nil {
				return h, fmt.Errorf("export audit: record %d: %w", r.Seq, err)
			}
			if _, err := bw.Write(b); err != nil {
				return h, fmt.Errorf("export audit: %w", err)
			}
			h.Records++
			h.Last, h.Head = r.Seq, r.Hash
		}
		after = recs[len(recs)-1].Seq
	}
	if o.Format != ExportOCSF {
		b, _ := json.Marshal(h)
		bw.Write(append(b, '\n'))
	}
	if err := bw.Flush(); err != nil {
		return h, fmt.Errorf("export audit: %w", err)
	}
	return h, nil
}

// jsonlRecord is r as one JSON line, its body as stored (not re-escaped:
// the bytes that were hashed).
func jsonlRecord(r api.AuditRecord) ([]byte, error) {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	err := e.Encode(r)
	return []byte(b.String()), err
}
