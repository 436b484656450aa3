package jsonparse

// ScanFast and ScanTop are Scan's two passes alone: scanFast (what it
// found, and false where it leaves the document to the second pass) and
// scanTop (the recursive scan, which says why a document is refused), for
// the tests to hold the first to the second and both to ParseStrict.
func ScanFast(s string, lim Limits) (Scanned, bool) {
	p := newScanParser(s, lim)
	ok := p.scanFast()
	return p.sc, ok
}

func ScanTop(s string, lim Limits) (Scanned, error) {
	p := newScanParser(s, lim)
	err := p.scanTop()
	return p.sc, err
}

func newScanParser(s string, lim Limits) *parser {
	p := &parser{s: s, strict: true, lim: lim}
	if p.lim.Depth <= 0 {
		p.lim.Depth = MaxDepth
	}
	return p
}
