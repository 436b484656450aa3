package compare

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// ---- Extism ----

// extismPlugin is wasm/extism.wat compiled by Extism with maiden's limits:
// a 64 MiB memory ceiling (Manifest.Memory.MaxPages, which wazero applies
// to each memory: the plugin's and the kernel's) and, if timeout, the
// workload's timeout (Manifest.Timeout, which also switches on wazero's
// CloseOnContextDone; without it no deadline can stop the guest).
func extismPlugin(tb testing.TB, w *workload, timeout bool) *extism.CompiledPlugin {
	key := fmt.Sprintf("extism/%s/timeout=%t", w.name, timeout)
	return shared(tb, key, func() (*extism.CompiledPlugin, func()) {
		wasm := coreModule(tb, filepath.Join(testkit.RepoRoot(tb), "bench", "compare", "wasm", "extism.wat"))
		m := extism.Manifest{
			Wasm:   []extism.Wasm{extism.WasmData{Data: wasm}},
			Memory: &extism.ManifestMemory{MaxPages: memoryPages},
		}
		if timeout {
			m.Timeout = uint64(w.timeout.Milliseconds())
		}
		p, err := extism.NewCompiledPlugin(ctxBG, m, extism.PluginConfig{}, nil)
		if err != nil {
			tb.Fatal(err)
		}
		return p, func() { p.Close(ctxBG) }
	})
}

// extismRow calls w's export on a fresh plugin instance per call
// (CompiledPlugin.Instance: Extism's kernel module and the plugin module
// instantiated, then closed) or, if reused, on one instance per goroutine.
func extismRow(timeout, reused bool) func(testing.TB, *workload, int) *run {
	return func(tb testing.TB, w *workload, g int) *run {
		cp := extismPlugin(tb, w, timeout)
		input := []byte(w.input)
		call := func(p *extism.Plugin) error {
			rc, out, err := p.Call(w.extism, input)
			if err != nil {
				return fmt.Errorf("extism: rc %d: %w", rc, err)
			}
			return check(string(out), w.want)
		}
		if !reused {
			op := func() error {
				p, err := cp.Instance(ctxBG, extism.PluginInstanceConfig{})
				if err != nil {
					return err
				}
				defer p.Close(ctxBG)
				return call(p)
			}
			if err := op(); err != nil {
				tb.Fatal(err)
			}
			return &run{ops: repeat(g, op)}
		}
		rn := &run{}
		var plugins []*extism.Plugin
		for range g {
			p, err := cp.Instance(ctxBG, extism.PluginInstanceConfig{})
			if err != nil {
				tb.Fatal(err)
			}
			plugins = append(plugins, p)
			if err := call(p); err != nil {
				tb.Fatal(err)
			}
			rn.ops = append(rn.ops, func() error { return call(p) })
		}
		rn.done = func() {
			for _, p := range plugins {
				p.Close(ctxBG)
			}
		}
		return rn
	}
}

// ---- wazero ----

// wazeroModule is the core module of w's WAT fixture (maiden's own guest
// code, without the component wrapper) compiled by wazero's compiler with
// maiden's memory ceiling and, if closeOnDone, WithCloseOnContextDone(true):
// without it a deadline cannot stop a running guest.
type wazeroModule struct {
	rt  wazero.Runtime
	mod wazero.CompiledModule
}

func compileWazero(tb testing.TB, w *workload, closeOnDone bool) *wazeroModule {
	key := fmt.Sprintf("wazero/%s/close=%t", w.name, closeOnDone)
	return shared(tb, key, func() (*wazeroModule, func()) {
		cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone).WithMemoryLimitPages(memoryPages)
		rt := wazero.NewRuntimeWithConfig(ctxBG, cfg)
		mod, err := rt.CompileModule(ctxBG, coreModule(tb, watFixture(tb, w.wat)))
		if err != nil {
			tb.Fatal(err)
		}
		return &wazeroModule{rt, mod}, func() { rt.Close(ctxBG) }
	})
}

// anonymous instances: wazero refuses two instances with the same name.
var wazeroInstance = wazero.NewModuleConfig().WithName("").WithStartFunctions()

// wazeroRow calls execute through the canonical ABI by hand, as wasmtime's
// component runtime does for maiden: cabi_realloc for the input, copy it
// in, execute, read the result<string,string> area, copy the output out,
// cabi_post_execute. The call gets the workload's timeout as a context
// deadline. Fresh: a new module instance per call from the compiled module;
// reused: one instance per goroutine.
func wazeroRow(closeOnDone, reused bool) func(testing.TB, *workload, int) *run {
	return func(tb testing.TB, w *workload, g int) *run {
		wm := compileWazero(tb, w, closeOnDone)
		if !reused {
			op := func() error {
				ctx, cancel := context.WithTimeout(ctxBG, w.timeout)
				defer cancel()
				m, err := wm.rt.InstantiateModule(ctx, wm.mod, wazeroInstance)
				if err != nil {
					return err
				}
				defer m.Close(ctx)
				return wazeroCall(ctx, m, w)
			}
			if err := op(); err != nil {
				tb.Fatal(err)
			}
			return &run{ops: repeat(g, op)}
		}
		rn := &run{}
		var mods []api.Module
		for range g {
			m, err := wm.rt.InstantiateModule(ctxBG, wm.mod, wazeroInstance)
			if err != nil {
				tb.Fatal(err)
			}
			mods = append(mods, m)
			op := func() error {
				ctx, cancel := context.WithTimeout(ctxBG, w.timeout)
				defer cancel()
				return wazeroCall(ctx, m, w)
			}
			if err := op(); err != nil {
				tb.Fatal(err)
			}
			rn.ops = append(rn.ops, op)
		}
		rn.done = func() {
			for _, m := range mods {
				m.Close(ctxBG)
			}
		}
		return rn
	}
}

func wazeroCall(ctx context.Context, m api.Module, w *workload) error {
	mem := m.Memory()
	n := uint64(len(w.input))
	res, err := m.ExportedFunction("cabi_realloc").Call(ctx, 0, 0, 1, n)
	if err != nil {
		return err
	}
	ptr := uint32(res[0])
	if !mem.WriteString(ptr, w.input) {
		return errors.New("wazero: input out of range")
	}
	if res, err = m.ExportedFunction("execute").Call(ctx, uint64(ptr), n); err != nil {
		return err
	}
	ret := uint32(res[0])
	tag, ok1 := mem.ReadByte(ret)
	p, ok2 := mem.ReadUint32Le(ret + 4)
	l, ok3 := mem.ReadUint32Le(ret + 8)
	b, ok4 := mem.Read(p, l)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return errors.New("wazero: result out of range")
	}
	out := string(b) // copies, as the component runtime does
	if _, err := m.ExportedFunction("cabi_post_execute").Call(ctx, uint64(ret)); err != nil {
		return err
	}
	if tag != 0 {
		return errors.New("tool error: " + out)
	}
	return check(out, w.want)
}
