package jsonschema

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	lib "github.com/santhosh-tekuri/jsonschema/v6"
)

// validate checks a parsed input against the schema, with no deadline; see
// validateCtx.
func (s *Schema) validate(v any) error {
	return s.validateCtx(context.Background(), v)
}

// validateCtx checks a parsed input against the schema and explains the
// first few problems by location in the input (at most maxProblems, in at
// most maxReportBytes, counting the rest). It returns ctx's error when ctx
// ends first, at once, and the validation left running stops at its next
// check: every schema evaluated passes one (see instrument), and a regular
// expression every 1 KiB. So the work after the return is one step: a
// pattern of 2,000 instructions over 1 KiB (~10 ms here, ~55 ms at worst),
// an enum of 1,000 values compared with one value, uniqueItems hashing one
// array (~40 ms for 100,000 items), or a loop over a value's parts that
// meets only boolean subschemas. Whatever ctx, the work limits end it after
// 2 M checks and 2 M match units (~1-2 s here; BenchmarkValidate/worst-*).
// A validation whose worst case is short runs on the caller's goroutine
// and ignores ctx: it ends within ~10 ms anyway.
//
// An error that is not ctx's is the report, for a result of kind input.
func (s *Schema) validateCtx(ctx context.Context, v any) error {
	return s.validateWithin(ctx, 0, v)
}

// validateWithin is validateCtx under an extra timeout (0: none), which
// costs a timer only when the validation is long enough to run on its own
// goroutine.
func (s *Schema) validateWithin(ctx context.Context, timeout time.Duration, v any) error {
	if s.err != nil {
		return s.err
	}
	var size inputSize
	if err := checkInput(v, &size); err != nil {
		return fmt.Errorf("input does not match the tool's schema:\n  %v", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A goroutine and a channel cost ~10 µs here, as much as a tiny
	// tool's whole call, so a validation whose worst case is short
	// (~10 ms) runs here, whatever ctx, in one pass: it can record few
	// problems.
	worst := size.nodes*s.expansion + size.bytes*s.maxInsts/64
	if worst <= maxInlineWork {
		if s.fast != nil && s.fast.fastFits(v, &neverStop) {
			return nil
		}
		c, err := s.take(&neverStop)
		if err != nil {
			return err
		}
		defer s.put(c)
		return c.validate(v, false)
	}
	stop := new(atomic.Bool) // this validation's; its copy may serve another later
	run := func() error {
		if s.fast != nil && s.fast.fastFits(v, stop) {
			return nil
		}
		c, err := s.take(stop) // may compile a copy: on the goroutine too
		if err != nil {
			return err
		}
		defer s.put(c)
		return c.validate(v, true)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if ctx.Done() == nil {
		return run()
	}
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		stop.Store(true)
		return ctx.Err()
	}
}

// take gives the caller a copy for one validation, reading stop.
func (s *Schema) take(stop *atomic.Bool) (*compiledSchema, error) {
	s.mu.Lock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		c.stop = stop
		return c, nil
	}
	s.mu.Unlock()
	doc, err := lib.UnmarshalJSON(strings.NewReader(s.text))
	if err != nil {
		return nil, err // compiled once already; cannot happen
	}
	c, err := compileCopy(doc, nil)
	if err != nil {
		return nil, err
	}
	c.stop = stop
	return c, nil
}

func (s *Schema) put(c *compiledSchema) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.idle) < maxIdleCopies {
		s.idle = append(s.idle, c)
	}
}

// validate decides whether v fits, and if not, explains why; a stop or a
// limit reached deep in the library comes back here as a panic. With
// twoPass it first decides under not-not, recording no problems; without,
// it explains at once, under the larger limit.
func (c *compiledSchema) validate(v any, twoPass bool) (err error) {
	defer func() {
		switch r := recover(); r.(type) {
		case nil:
		case stopPanic:
			err = context.Canceled // nobody is waiting for it
		case overPanic:
			if c.explaining {
				err = fmt.Errorf("input does not match the tool's schema; locating its problems is over the limit of %d checks and %d match units", maxExplainChecks, maxMatchWork)
			} else {
				err = fmt.Errorf("input does not match the tool's schema: checking it is over the limit of %d checks and %d match units; send a smaller input", maxChecks, maxMatchWork)
			}
		default:
			panic(r)
		}
	}()
	c.checks, c.checkLimit, c.match, c.explaining = 0, maxChecks, 0, false
	if twoPass {
		if c.check.Validate(v) == nil {
			return nil
		}
		c.checks, c.checkLimit, c.explaining = 0, maxExplainChecks, true // match work is counted over both
	}
	err = c.schema.Validate(v)
	var verr *lib.ValidationError
	if !errors.As(err, &verr) {
		if err == nil && twoPass { // the two passes disagree: cannot happen
			return errors.New("input does not match the tool's schema")
		}
		return err
	}
	return errors.New(report(verr))
}
