package ocitest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-openapi/runtime"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"
	"github.com/sigstore/sigstore-go/pkg/tlog"
)

// TransparencyLog starts a Rekor-style transparency log of s's trust root
// on loopback (closed when the test ends) and returns its URL, for
// `cosign sign --rekor-url`: it answers POST /api/v1/log/entries with the
// entry canonicalized by Rekor's own types, its signed entry timestamp and
// an inclusion proof with a signed checkpoint, both by the trust root's
// log key (VirtualSigstore's). It logs nothing: each entry is index 0 of
// a tree of its own, which is all a verifier checks offline.
func (s *Sigstore) TransparencyLog(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/log/entries" {
			http.Error(w, "only POST /api/v1/log/entries", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		entry, uuid, err := s.logEntry(r, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/api/v1/log/entries/"+uuid)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(models.LogEntry{uuid: entry})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (s *Sigstore) logEntry(r *http.Request, body []byte) (models.LogEntryAnon, string, error) {
	pe, err := models.UnmarshalProposedEntry(bytes.NewReader(body), runtime.JSONConsumer())
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	impl, err := types.CreateVersionedEntry(pe)
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	canonical, err := types.CanonicalizeEntry(r.Context(), impl)
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	logID, err := s.vs.RekorLogID()
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	now, index := time.Now().Unix(), int64(0)
	encoded := base64.StdEncoding.EncodeToString(canonical)
	set, err := s.vs.RekorSignPayload(tlog.RekorPayload{Body: encoded, IntegratedTime: now, LogIndex: index, LogID: logID})
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	proof, err := s.vs.GetInclusionProof(canonical)
	if err != nil {
		return models.LogEntryAnon{}, "", err
	}
	leaf := sha256.Sum256(append([]byte{0}, canonical...))
	return models.LogEntryAnon{
		Body: encoded, IntegratedTime: &now, LogID: &logID, LogIndex: &index,
		Verification: &models.LogEntryAnonVerification{SignedEntryTimestamp: set, InclusionProof: proof},
	}, hex.EncodeToString(leaf[:]), nil
}
