package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/maiden-run/maiden/config"
	"github.com/maiden-run/maiden/internal/oci"
)

// The oci:// commands (docs/oci.md): add pins a registry's component into
// agent.toml, pull fetches every pinned one into the local store, publish
// pushes (and signs) one. Registry credentials come from docker's
// config.json and credential helpers; nothing here writes them anywhere.

const addHelp = `maiden add resolves TAG at the registry, pulls the component (checking
its cosign signature with -key, or its keyless Sigstore bundle with -issuer,
-identity and -trusted-root), and appends to agent.toml:

  [tools.NAME]
  path = "oci://REGISTRY/REPO:TAG@sha256:..."
  verify = { key = "cosign.pub" }      (with -key)
  verify = { issuer = "...", identity = "...", trusted_root = "trusted_root.json" }
                                       (with -issuer, -identity, -trusted-root)

NAME defaults to the repository's last element. The component is stored
under $MAIDEN_OCI_STORE (default: the user cache directory's maiden/oci),
where every later load verifies it offline.`

// cmdAdd is maiden add [-config agent.toml] [-key cosign.pub] oci://REGISTRY/REPO:TAG [NAME].
func cmdAdd(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, c := newFlags("add", stderr)
	keyFile := fs.String("key", "", "a cosign public key `FILE` the component must be signed with (written as verify.key)")
	issuer := fs.String("issuer", "", "keyless: the OIDC issuer `URL` the signing certificate must name (written as verify.issuer)")
	identity := fs.String("identity", "", "keyless: the certificate `IDENTITY` (an email or a URI) the component must be signed by (written as verify.identity)")
	trustedRoot := fs.String("trusted-root", "", "keyless: Sigstore's trusted_root.json `FILE` the certificate and its evidence must verify against (written as verify.trusted_root)")
	tlog := fs.Bool("transparency-log", true, "keyless: require a transparency-log entry (false: a signed timestamp instead)")
	credential := credentialFlag(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(rest) < 1 || len(rest) > 2 {
		fmt.Fprintln(stderr, "usage: maiden add [-config agent.toml] [-key cosign.pub | -issuer URL -identity ID -trusted-root trusted_root.json] [-credential NAME] oci://REGISTRY/REPO:TAG [NAME]")
		return exitUsage
	}
	keyless := *issuer != "" || *identity != "" || *trustedRoot != ""
	if keyless && (*issuer == "" || *identity == "" || *trustedRoot == "" || *keyFile != "") {
		fmt.Fprintln(stderr, "maiden add: a keyless verify takes -issuer, -identity and -trusted-root together, and no -key")
		return exitUsage
	}
	r, err := oci.ParseRef(rest[0])
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", err)
		return exitUsage
	}
	name := path.Base(r.Repository)
	if len(rest) == 2 {
		name = rest[1]
	}
	var key *oci.Key
	if *keyFile != "" {
		if key, err = loadKey(*keyFile); err != nil {
			fmt.Fprintln(stderr, "maiden add:", err)
			return exitUsage
		}
	}
	var kv *config.KeylessVerify
	var kl *oci.Keyless
	if keyless {
		kv = &config.KeylessVerify{Issuer: *issuer, Identity: *identity, TrustedRoot: *trustedRoot, TransparencyLog: *tlog}
		if kl, err = config.LoadKeyless(kv); err != nil {
			fmt.Fprintln(stderr, "maiden add:", err)
			return exitUsage
		}
	}
	opts, err := registryOptions(r, key, kl, *credential)
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", err)
		return exitUsage
	}
	pinned, err := oci.Resolve(ctx, r, opts)
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", terminalSafe(err.Error()))
		return exitUsage
	}
	st, err := oci.OpenStore(oci.DefaultStoreDir())
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", err)
		return exitUsage
	}
	comp, err := oci.Pull(ctx, pinned, st, opts)
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", terminalSafe(err.Error()))
		return exitUsage
	}
	table := fmt.Sprintf("[tools.%s]\npath = %q\n", name, pinned.String())
	if *keyFile != "" {
		table += fmt.Sprintf("verify = { key = %q }\n", keyPathFor(c.config, *keyFile))
	}
	if kv != nil {
		noLog := ""
		if !kv.TransparencyLog {
			noLog = ", transparency_log = false"
		}
		table += fmt.Sprintf("verify = { issuer = %q, identity = %q, trusted_root = %q%s }\n", kv.Issuer, kv.Identity, keyPathFor(c.config, kv.TrustedRoot), noLog)
	}
	if *credential != "" {
		table += fmt.Sprintf("registry_credential = %q\n", *credential)
	}
	if _, err := appendToolTable(c.config, name, table); err != nil {
		fmt.Fprintln(stderr, "maiden add:", terminalSafe(err.Error()))
		return exitUsage
	}
	signed := "unsigned"
	switch {
	case kl != nil:
		signed = "signed by " + comp.Signer
	case comp.Signer != "":
		signed = "signed by key " + comp.Signer
	}
	fmt.Fprintf(stdout, "added [tools.%s] to %s: %s (%s)\n", name, c.config, pinned, signed)
	if _, err := config.Load(c.config); err != nil {
		// The table is written; say what else stops the file loading.
		printConfigErrors(stderr, err)
		return exitUsage
	}
	return exitOK
}

// keyPathFor is the key file as agent.toml at cfg should name it:
// relative to the file's directory when it is beneath it.
func keyPathFor(cfg, key string) string {
	abs, err := filepath.Abs(key)
	if err != nil {
		return key
	}
	dir, err := filepath.Abs(filepath.Dir(cfg))
	if err != nil {
		return abs
	}
	if rel, err := filepath.Rel(dir, abs); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return abs
}

// registryOptions are the pull options for r with key or keyless policy
// kl, logging in with the secret named credential (MAIDEN_SECRET_NAME)
// when one is named; else docker's config.json and credential helpers. The
// value is never printed.
func registryOptions(r oci.Ref, key *oci.Key, kl *oci.Keyless, credential string) (*oci.PullOptions, error) {
	o := &oci.PullOptions{Key: key, Keyless: kl}
	if credential == "" {
		return o, nil
	}
	kc, err := oci.SecretKeychain(r.Registry, credential, os.Getenv("MAIDEN_SECRET_"+credential))
	if err != nil {
		return nil, err
	}
	o.Keychain = kc
	return o, nil
}

// credentialFlag is -credential NAME of add and publish.
func credentialFlag(fs interface {
	String(name, value, usage string) *string
}) *string {
	return fs.String("credential", "", "log in to the registry with the secret `NAME`: MAIDEN_SECRET_NAME holds USER:PASSWORD or a registry token (add writes it as registry_credential; default: docker's config.json and credential helpers)")
}

func loadKey(file string) (*oci.Key, error) {
	b, err := config.ReadFile(file, config.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	k, err := oci.ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}

// cmdPull is maiden pull [-config agent.toml]: fetch every pinned oci://
// tool of the file into the store (verified; signed ones checked), so the
// file loads offline from then on.
func cmdPull(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, c := newFlags("pull", stderr)
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "maiden pull: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	srcs, err := config.Sources(c.config)
	if err != nil {
		printConfigErrors(stderr, err)
		hintPins(ctx, stderr, err)
		return exitUsage
	}
	st, err := oci.OpenStore(oci.DefaultStoreDir())
	if err != nil {
		fmt.Fprintln(stderr, "maiden pull:", err)
		return exitUsage
	}
	bad := 0
	for _, s := range srcs {
		r, err := oci.ParseRef(s.Ref)
		if err != nil {
			continue // config refused it already
		}
		var key *oci.Key
		if s.Key != "" {
			if key, err = loadKey(s.Key); err != nil {
				fmt.Fprintln(stderr, "maiden pull:", err)
				bad++
				continue
			}
		}
		var kl *oci.Keyless
		if s.Keyless != nil {
			if kl, err = config.LoadKeyless(s.Keyless); err != nil {
				fmt.Fprintln(stderr, "maiden pull:", err)
				bad++
				continue
			}
		}
		have := func() error { _, err := st.Load(r, key); return err }
		if kl != nil {
			have = func() error { _, err := st.LoadKeyless(r, kl); return err }
		}
		if have() == nil {
			fmt.Fprintf(stdout, "have %s\n", r)
			continue
		}
		opts, err := registryOptions(r, key, kl, s.Credential)
		if err != nil {
			fmt.Fprintf(stderr, "maiden pull: %s: %v\n", r, err)
			bad++
			continue
		}
		if _, err := oci.Pull(ctx, r, st, opts); err != nil {
			fmt.Fprintln(stderr, "maiden pull:", terminalSafe(err.Error()))
			bad++
			continue
		}
		fmt.Fprintf(stdout, "pulled %s\n", r)
	}
	if bad > 0 {
		return exitUsage
	}
	return exitOK
}

// hintPins prints, for each oci:// path of a refused file that names a
// tag only, the digest the tag names now, to pin.
func hintPins(ctx context.Context, stderr io.Writer, err error) {
	var errs config.Errors
	if !errors.As(err, &errs) {
		return
	}
	for _, e := range errs {
		var pe *oci.PinError
		if !errors.As(e, &pe) {
			continue
		}
		pinned, rerr := oci.Resolve(ctx, pe.Ref, nil)
		if rerr != nil {
			fmt.Fprintf(stderr, "%s:%d: %s: cannot resolve the tag to pin it: %s\n", e.File, e.Line, e.Key, terminalSafe(rerr.Error()))
			continue
		}
		fmt.Fprintf(stderr, "%s:%d: %s: to pin what the tag names now: path = %q\n", e.File, e.Line, e.Key, pinned.String())
	}
}

// cmdPublish is maiden publish [-sign-key cosign.key] FILE.wasm oci://REGISTRY/REPO:TAG.
func cmdPublish(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := bareFlags("publish", stderr)
	signKey := fs.String("sign-key", "", "a cosign private key `FILE` to sign with (password: $COSIGN_PASSWORD)")
	credential := credentialFlag(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(rest) != 2 {
		fmt.Fprintln(stderr, "usage: maiden publish [-sign-key cosign.key] [-credential NAME] FILE.wasm oci://REGISTRY/REPO:TAG")
		return exitUsage
	}
	r, err := oci.ParseRef(rest[1])
	if err != nil || r.Pinned() {
		fmt.Fprintln(stderr, "maiden publish: want oci://REGISTRY/REPO:TAG, got", rest[1])
		return exitUsage
	}
	var signer *oci.Signer
	if *signKey != "" {
		b, err := config.ReadFile(*signKey, config.MaxFileBytes)
		if err == nil {
			signer, err = oci.ParseSigner(b, func() ([]byte, error) { return []byte(os.Getenv("COSIGN_PASSWORD")), nil })
		}
		if err != nil {
			fmt.Fprintln(stderr, "maiden publish: sign key:", err)
			return exitUsage
		}
	}
	wasm, err := config.ReadFile(rest[0], oci.MaxLayerBytes)
	if err != nil {
		fmt.Fprintln(stderr, "maiden publish:", err)
		return exitUsage
	}
	opts, err := registryOptions(r, nil, nil, *credential)
	if err != nil {
		fmt.Fprintln(stderr, "maiden publish:", err)
		return exitUsage
	}
	pinned, err := oci.Push(ctx, r, wasm, opts)
	if err != nil {
		fmt.Fprintln(stderr, "maiden publish:", terminalSafe(err.Error()))
		return exitUsage
	}
	if signer != nil {
		if err := oci.Sign(ctx, pinned, signer, opts); err != nil {
			fmt.Fprintln(stderr, "maiden publish:", terminalSafe(err.Error()))
			return exitUsage
		}
	}
	fmt.Fprintf(stdout, "path = %q\n", pinned.String())
	return exitOK
}
