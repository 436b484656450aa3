package oci

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	sigsig "github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// Push uploads a component to r (a tag) as a WebAssembly OCI artifact and
// returns r pinned to the manifest's digest.
func Push(ctx context.Context, r Ref, wasm []byte, opts *PullOptions) (Ref, error) {
	if err := checkComponent(wasm); err != nil {
		return Ref{}, fmt.Errorf("push %s: %w", r, err)
	}
	ref, err := r.parsed()
	if err != nil {
		return Ref{}, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), ConfigMediaType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(wasm, LayerMediaType), MediaType: LayerMediaType})
	if err != nil {
		return Ref{}, fmt.Errorf("push %s: %w", r, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Ref{}, fmt.Errorf("push %s: %w", r, err)
	}
	ctx, cancel, limit := opts.withDeadline(ctx)
	defer cancel()
	ro, done := opts.remote(ctx, r)
	defer done()
	if err := remote.Write(ref, img, ro...); err != nil {
		return Ref{}, fmt.Errorf("push %s to registry %s: %w", r, r.Registry, overdue(ctx, err, limit, r.Registry, StageUpload, r.String()))
	}
	pinned := r
	pinned.Digest = d.String()
	return pinned, nil
}

// Signer signs with a cosign-compatible private key.
type Signer struct {
	signer sigsig.Signer
}

// ParseSigner reads a PEM private key: cosign's encrypted cosign.key
// (password from password, which may return nil for none) or an
// unencrypted PKCS#8, EC or RSA key.
func ParseSigner(pemBytes []byte, password func() ([]byte, error)) (*Signer, error) {
	pk, err := cryptoutils.UnmarshalPEMToPrivateKey(pemBytes, func(bool) ([]byte, error) {
		if password == nil {
			return nil, nil
		}
		return password()
	})
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	s, err := sigsig.LoadSigner(pk, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	return &Signer{s}, nil
}

// Sign attaches a cosign signature to the pinned r, in cosign's layout
// (the sha256-HEX.sig tag, one simple-signing layer), so that `cosign
// verify --key` accepts it. A signature already there is kept: the new
// one is appended, as cosign does; a tag that holds anything but an
// image manifest is refused, never replaced. Reading what is there and
// writing the signature are both bounded by opts' timeout.
func Sign(ctx context.Context, r Ref, s *Signer, opts *PullOptions) error {
	if !r.Pinned() {
		return fmt.Errorf("sign %s: %w", r, ErrNotPinned)
	}
	ref, err := r.parsed()
	if err != nil {
		return err
	}
	var p payload.SimpleContainerImage
	p.Critical.Type = payload.CosignSignatureType
	p.Critical.Identity.DockerReference = ref.Context().Name()
	p.Critical.Image.DockerManifestDigest = r.Digest
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	raw, err := s.signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sign %s: %w", r, err)
	}
	layer := static.NewLayer(body, cosignSigMediaType)
	ctx, cancel, d := opts.withDeadline(ctx)
	defer cancel()
	ro, done := opts.remote(ctx, r)
	defer done()
	tag := ref.Context().Tag(signatureTag(r.Digest))
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	switch desc, err := remote.Get(tag, ro...); {
	case err == nil:
		// Only an image manifest holds signatures to append to; anything
		// else there (an index, which Image would resolve to one of its
		// children) is not replaced by an image of one signature.
		if desc.MediaType != types.OCIManifestSchema1 && desc.MediaType != types.DockerManifestSchema2 {
			return fmt.Errorf("sign %s: the signature tag %s holds a %s, not an image of signatures: it is left as it is", r, tag.TagStr(), desc.MediaType)
		}
		old, err := desc.Image()
		if err != nil {
			return fmt.Errorf("sign %s: the signatures at %s: %w", r, tag.TagStr(), err)
		}
		base = old
	case !isNotFound(err):
		return fmt.Errorf("sign %s: reading the signatures there: %w", r, overdue(ctx, err, d, r.Registry, StageSignature, tag.TagStr()))
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:       layer,
		MediaType:   cosignSigMediaType,
		Annotations: map[string]string{cosignSigAnnotation: base64.StdEncoding.EncodeToString(raw)},
	})
	if err != nil {
		return fmt.Errorf("sign %s: %w", r, err)
	}
	if err := remote.Write(tag, img, ro...); err != nil {
		return fmt.Errorf("sign %s: push signature: %w", r, overdue(ctx, err, d, r.Registry, StageUpload, tag.TagStr()))
	}
	return nil
}
