package grant

import "testing"

// TestFSSubtree: the subtree grant of a directory names that directory,
// whatever its segments hold, and its literal prefix gives it back.
func TestFSSubtree(t *testing.T) {
	for _, dir := range []string{"/", "/srv", "/srv/my docs", `/srv/we\ird`, "/srv/a*b", `/srv/"q"`, "/srv/**"} {
		g, err := FSSubtree("read", dir)
		if err != nil {
			t.Fatalf("FSSubtree(%q): %v", dir, err)
		}
		p, err := Parse(g.String())
		if err != nil || !p.Equal(g) {
			t.Fatalf("FSSubtree(%q) = %s does not read back: %v", dir, g, err)
		}
		if got, ok := g.LiteralPathPrefix(); !ok || got != dir {
			t.Errorf("FSSubtree(%q).LiteralPathPrefix() = %q, %v", dir, got, ok)
		}
		inside := dir + "/x"
		if dir == "/" {
			inside = "/x"
		}
		ti, _ := FSTarget("read", inside)
		if !g.Allows(ti) {
			t.Errorf("%s does not allow %s", g, inside)
		}
		if dir != "/" {
			to, _ := FSTarget("read", "/srv/other/x")
			if g.Allows(to) && dir != "/srv" {
				t.Errorf("%s allows %s", g, "/srv/other/x")
			}
		}
	}
	for _, dir := range []string{"", "srv", "/srv/", "/srv/../etc", "/srv//x"} {
		if _, err := FSSubtree("read", dir); err == nil {
			t.Errorf("FSSubtree(%q) accepted", dir)
		}
	}
	if _, err := FSSubtree("exec", "/srv"); err == nil {
		t.Error(`FSSubtree("exec") accepted`)
	}
	g, _ := Parse(`fs:read "/home/*/.config/x/Login Data"`)
	if p, _ := g.LiteralPathPrefix(); p != "/home" {
		t.Errorf("LiteralPathPrefix = %q, want /home", p)
	}
}
