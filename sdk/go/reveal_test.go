package maiden

import "testing"

// TestLiftStringResult: reveal's return area, ok and err, and a tag the
// host never writes.
func TestLiftStringResult(t *testing.T) {
	for _, c := range []struct {
		tag    byte
		s      string
		wantOK bool
		want   string
	}{
		{0, "s3cr3t-value", true, "s3cr3t-value"},
		{0, "", true, ""},
		{1, "no secret:reveal card", false, "no secret:reveal card"},
		{7, "x", false, "malformed result from the host (tag 7)"},
	} {
		m := newFakeMemory()
		var strArea [8]byte
		m.str(strArea[:], c.s)
		ret, area := m.area(resultAreaSize)
		area[0] = c.tag
		copy(area[4:], strArea[:])
		ok, got := liftStringResult(m, ret)
		if ok != c.wantOK || got != c.want {
			t.Errorf("tag %d: got (%v, %q), want (%v, %q)", c.tag, ok, got, c.wantOK, c.want)
		}
	}
}
