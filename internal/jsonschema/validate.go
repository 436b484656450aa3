package jsonschema

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/maiden-run/maiden/internal/jsonparse"
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
		return inputLimitError(err)
	}
	in := inputCheck{s: s, v: v, decoded: true}
	_, err := s.validateSized(ctx, timeout, size, &in)
	return err
}

func inputLimitError(err error) error {
	return fmt.Errorf("input does not match the tool's schema:\n  %v", err)
}

// validateScanned is validateWithin for an input given as its text and
// its scan (ScanInput): the fast check reads the top-level object's
// members, decoding only those the schema says something of, and the text
// is decoded (jsonparse.ParseStrict) only when the fast check cannot say
// yes or the input is past the limits (for checkInput's report). It
// returns the value it decoded, if it did and finished (decoded), for the
// caller to keep.
func (s *Schema) validateScanned(ctx context.Context, timeout time.Duration, text string, sc *jsonparse.Scanned) (v any, decoded bool, err error) {
	if s.err != nil {
		return nil, false, s.err
	}
	if sc.Problem || !sc.Object || s.fast == nil {
		// checkInput reports the problem where it is; the library needs
		// the value anyway.
		if v, err = decodeScanned(text); err != nil {
			return nil, false, err
		}
		return v, true, s.validateWithin(ctx, timeout, v)
	}
	in := inputCheck{s: s, text: text, members: sc.Members}
	finished, err := s.validateSized(ctx, timeout, inputSize{nodes: sc.Nodes, bytes: sc.Bytes}, &in)
	if finished && in.decoded {
		return in.v, true, err
	}
	return nil, false, err
}

// inputCheck is the input of one validation: its value (decoded), or its
// text and its top-level members, decoded when the library's path needs
// the value.
type inputCheck struct {
	s       *Schema
	v       any
	decoded bool
	text    string
	members []jsonparse.Member
}

// fast is the fast check, on the value or on the members.
func (in *inputCheck) fast(stop *atomic.Bool) bool {
	switch {
	case in.s.fast == nil:
		return false
	case in.decoded:
		return in.s.fast.fastFits(in.v, stop)
	}
	return in.s.fast.fastFitsMembers(in.members, stop)
}

// value is the input's value, decoded once.
func (in *inputCheck) value() (any, error) {
	if !in.decoded {
		v, err := decodeScanned(in.text)
		if err != nil {
			return nil, err
		}
		in.v, in.decoded = v, true
	}
	return in.v, nil
}

// decodeScanned decodes a text ScanInput accepted, which cannot fail.
func decodeScanned(text string) (any, error) {
	v, err := jsonparse.ParseStrict(text)
	if err != nil {
		return nil, fmt.Errorf("internal error: the input's scan accepted what its parse refuses: %v", err)
	}
	return v, nil
}

// validateSized is the validation of an input of the given size, checked
// against the limits already: in's fast check first (a yes is final),
// then the library's path on its value. finished is false when ctx ended
// first (the validation goes on, on its goroutine and its own copy of in,
// until it stops); when true, in holds what was decoded.
func (s *Schema) validateSized(ctx context.Context, timeout time.Duration, size inputSize, in *inputCheck) (finished bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	// A goroutine and a channel cost ~10 µs here, as much as a tiny
	// tool's whole call, so a validation whose worst case is short
	// (~10 ms) runs here, whatever ctx, in one pass: it can record few
	// problems.
	worst := size.nodes*s.expansion + size.bytes*s.maxInsts/64
	if s.regexFormat {
		worst += size.bytes * regexParseUnits
	}
	if worst <= maxInlineWork {
		if in.fast(&neverStop) {
			return true, nil
		}
		v, err := in.value()
		if err != nil {
			return true, err
		}
		c, err := s.take(&neverStop)
		if err != nil {
			return true, err
		}
		defer s.put(c)
		return true, c.validate(v, false)
	}
	stop := new(atomic.Bool) // this validation's; its copy may serve another later
	own := new(inputCheck)   // the goroutine's, copied back once it is done
	*own = *in
	run := func() error {
		if own.fast(stop) {
			return nil
		}
		v, err := own.value()
		if err != nil {
			return err
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
		err := run()
		*in = *own
		return true, err
	}
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		*in = *own
		return true, err
	case <-ctx.Done():
		stop.Store(true)
		return false, ctx.Err()
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
