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
	"time"

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
  schema = "sha256:..."

schema pins the tool's definition: the hash of the description, input
schema and output schema the component reports, loaded once here. A
component that reports another does not load (so a new digest cannot
change what agents are told without a review); the document is kept in
the store. NAME defaults to the repository's last element. The component is stored
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
	timeout := timeoutFlag(fs)
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(rest) < 1 || len(rest) > 2 {
		fmt.Fprintln(stderr, "usage: maiden add [-config agent.toml] [-key cosign.pub | -issuer URL -identity ID -trusted-root trusted_root.json] [-credential NAME] [-timeout 10m] oci://REGISTRY/REPO:TAG [NAME]")
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
	opts, err := registryOptions(r, key, kl, *credential, *timeout)
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", err)
		return exitUsage
	}
	// A digest the operator gave is the pin: Pull checks that the tag,
	// if one is named too, still names it; only a tag alone is resolved.
	pinned := r
	if !r.Pinned() {
		if pinned, err = oci.Resolve(ctx, r, opts); err != nil {
			fmt.Fprintln(stderr, "maiden add:", terminalSafe(err.Error()))
			return exitUsage
		}
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
	// The definition, read by loading the pulled component as agent.toml
	// will name it (its verify with absolute paths).
	var verify string
	if *keyFile != "" {
		abs, err := filepath.Abs(*keyFile)
		if err != nil {
			fmt.Fprintln(stderr, "maiden add:", err)
			return exitUsage
		}
		verify = "verify = { key = " + tomlString(abs) + " }\n"
	}
	if kv != nil {
		abs, err := filepath.Abs(kv.TrustedRoot)
		if err != nil {
			fmt.Fprintln(stderr, "maiden add:", err)
			return exitUsage
		}
		verify = keylessLine(kv, abs)
	}
	schema, doc, err := schemaOf(ctx, c, name, pinned.String(), verify, stderr)
	if err == nil {
		_, err = st.PutSchema(doc)
	}
	if err != nil {
		fmt.Fprintln(stderr, "maiden add:", terminalSafe(err.Error()))
		return exitUsage
	}
	table := fmt.Sprintf("[tools.%s]\npath = %s\n", name, tomlString(pinned.String()))
	if *keyFile != "" {
		table += "verify = { key = " + tomlString(keyPathFor(c.config, *keyFile)) + " }\n"
	}
	if kv != nil {
		table += keylessLine(kv, keyPathFor(c.config, kv.TrustedRoot))
	}
	table += "schema = " + tomlString(schema) + "\n"
	if *credential != "" {
		table += "registry_credential = " + tomlString(*credential) + "\n"
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
	fmt.Fprintf(stdout, "added [tools.%s] to %s: %s (%s; schema %s)\n", name, c.config, pinned, signed, schema)
	if _, err := config.Load(c.config); err != nil {
		// The table is written; say what else stops the file loading.
		printConfigErrors(stderr, err)
		return exitUsage
	}
	return exitOK
}

// schemaOf loads the pinned component ref (already in the store, verified
// with the key file keyFile if set) as tool name, the way every load does,
// and returns the canonical document of the definition it reports
// (oci.SchemaDoc: description, input schema as served, output schema)
// and its hash: the schema agent.toml pins. The load
// is of a one-tool agent.toml in a temporary directory, so the user's
// file, and whatever else it holds, play no part.
func schemaOf(ctx context.Context, c *common, name, ref, verify string, stderr io.Writer) (string, []byte, error) {
	dir, err := os.MkdirTemp("", "maiden-add-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	table := fmt.Sprintf("version = 1\n[tools.%s]\npath = %s\n", name, tomlString(ref)) + verify
	cfg := filepath.Join(dir, "agent.toml")
	if err := os.WriteFile(cfg, []byte(table), 0o600); err != nil {
		return "", nil, err
	}
	one := &common{config: cfg, cache: c.cache, verbose: c.verbose, isolation: c.isolation}
	h, err := one.host(stderr)
	if err != nil {
		return "", nil, fmt.Errorf("load %s: %w", ref, err)
	}
	defer h.Close(context.Background())
	infos, err := h.Tools(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("load %s: %w", ref, err)
	}
	for _, info := range infos {
		if info.Name != name {
			continue
		}
		if info.Error != nil {
			return "", nil, fmt.Errorf("%s does not load as a tool: %s: %s", ref, info.Error.Kind, info.Error.Message)
		}
		if info.Provenance == nil {
			break
		}
		hash, doc := oci.SchemaDoc(info.Description, info.InputSchema, info.OutputSchema)
		if hash != info.Provenance.Schema {
			// One definition, hashed by the host and here: they agree
			// unless the two drift apart, which must not pin anything.
			return "", nil, fmt.Errorf("load %s: the schema hash the host computed (%s) is not the served definition's (%s)", ref, info.Provenance.Schema, hash)
		}
		return hash, doc, nil
	}
	return "", nil, fmt.Errorf("load %s: the host did not describe tool %s", ref, name)
}

// keylessLine is agent.toml's verify line of a keyless signature, its
// trusted root named trustedRoot.
func keylessLine(kv *config.KeylessVerify, trustedRoot string) string {
	noLog := ""
	if !kv.TransparencyLog {
		noLog = ", transparency_log = false"
	}
	return fmt.Sprintf("verify = { issuer = %s, identity = %s, trusted_root = %s%s }\n", tomlString(kv.Issuer), tomlString(kv.Identity), tomlString(trustedRoot), noLog)
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
// value is never printed. timeout bounds each operation (0: oci's default).
func registryOptions(r oci.Ref, key *oci.Key, kl *oci.Keyless, credential string, timeout time.Duration) (*oci.PullOptions, error) {
	o := &oci.PullOptions{Key: key, Keyless: kl, Timeout: timeout}
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

// timeoutFlag is -timeout of add and pull: how long one component's pull
// (resolve, manifest, signatures, layer) may take before the registry is
// given up on, naming the stage it was at.
func timeoutFlag(fs interface {
	Duration(name string, value time.Duration, usage string) *time.Duration
}) *time.Duration {
	return fs.Duration("timeout", oci.DefaultTimeout, "give up on a registry that has not delivered a component (its manifest, signatures and layer) within `DURATION`")
}

// pullFailed prints a refused pull; a deadline says how to allow more time.
func pullFailed(stderr io.Writer, err error) {
	fmt.Fprintln(stderr, "maiden pull:", terminalSafe(err.Error()))
	if errors.Is(err, oci.ErrDeadline) {
		fmt.Fprintln(stderr, "maiden pull: a slow registry or link: -timeout allows more time")
	}
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
	timeout := timeoutFlag(fs)
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
		verify := ""
		if s.Key != "" {
			verify = "verify = { key = " + tomlString(s.Key) + " }\n"
		}
		if s.Keyless != nil {
			if kl, err = config.LoadKeyless(s.Keyless); err != nil {
				fmt.Fprintln(stderr, "maiden pull:", err)
				bad++
				continue
			}
			verify = keylessLine(s.Keyless, s.Keyless.TrustedRoot)
		}
		have := func() error { _, err := st.Load(r, key); return err }
		if kl != nil {
			have = func() error { _, err := st.LoadKeyless(r, kl); return err }
		}
		verb := "have"
		if have() != nil {
			opts, err := registryOptions(r, key, kl, s.Credential, *timeout)
			if err != nil {
				fmt.Fprintf(stderr, "maiden pull: %s: %v\n", r, err)
				bad++
				continue
			}
			if _, err := oci.Pull(ctx, r, st, opts); err != nil {
				pullFailed(stderr, err)
				bad++
				continue
			}
			verb = "pulled"
		}
		if s.Schema != "" {
			// The pinned definition: recorded only when the component
			// reports it, so a load finds the document and the runtime
			// finds the same hash.
			if _, err := st.LoadSchema(s.Schema); err != nil {
				got, doc, err := schemaOf(ctx, c, s.Tool, s.Ref, verify, stderr)
				if err == nil && got != s.Schema {
					err = &oci.SchemaError{Tool: s.Tool, Ref: s.Ref, Pinned: s.Schema, Got: got}
				}
				if err == nil {
					_, err = st.PutSchema(doc)
				}
				if err != nil {
					fmt.Fprintln(stderr, "maiden pull:", terminalSafe(err.Error()))
					bad++
					continue
				}
			}
		}
		fmt.Fprintf(stdout, "%s %s\n", verb, r)
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
		fmt.Fprintf(stderr, "%s:%d: %s: to pin what the tag names now: path = %s\n", e.File, e.Line, e.Key, tomlString(pinned.String()))
	}
}

// cmdPublish is maiden publish [-sign-key cosign.key] FILE.wasm|DIR oci://REGISTRY/REPO:TAG.
// A tool project (a directory, or a .go, .js or .wat source) is built
// first, exactly as maiden build builds it (NAME.wasm beside its sources,
// loaded the way a call loads it), and the result pushed.
func cmdPublish(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := bareFlags("publish", stderr)
	signKey := fs.String("sign-key", "", "a cosign private key `FILE` to sign with (password: $COSIGN_PASSWORD)")
	credential := credentialFlag(fs)
	c := &common{}
	fs.StringVar(&c.cache, "cache", "", "compiled-component cache `DIR` for checking a built tool (\"off\" disables it; default: the user cache directory)")
	fs.Var(&c.isolation, "isolation", "`MODE`: where a built tool is checked; \"workers\" (the default) or \"process\"")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return parseFailed(err)
	}
	if len(rest) != 2 {
		fmt.Fprintln(stderr, "usage: maiden publish [-sign-key cosign.key] [-credential NAME] FILE.wasm|DIR oci://REGISTRY/REPO:TAG")
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
	opts, err := registryOptions(r, nil, nil, *credential, 0)
	if err != nil {
		fmt.Fprintln(stderr, "maiden publish:", err)
		return exitUsage
	}
	file := rest[0]
	if isToolSource(file) {
		// Built before anything is sent; what the build prints goes to
		// stderr, so stdout is only the path to paste.
		b, code := newBuilder(ctx, c, file, "", stderr, stderr)
		if code != exitOK {
			return code
		}
		code = b.build(ctx)
		b.close()
		if code != exitOK {
			return code
		}
		file = b.out
	}
	wasm, err := config.ReadFile(file, oci.MaxLayerBytes)
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

// isToolSource reports whether publish's argument is a tool project to
// build (a directory, or a source file maiden build takes) rather than a
// built component.
func isToolSource(arg string) bool {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		return true
	}
	switch strings.ToLower(filepath.Ext(arg)) {
	case ".go", ".js", ".wat":
		return true
	}
	return false
}
