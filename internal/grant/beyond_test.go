package grant

import "testing"

// TestBeyond pins the words that tell a human what a new grant adds to a
// wallet before it is installed (maiden cards grant, an "always" approval):
// what is new, against what today allows, and "nothing new" exactly when a
// grant of today covers it.
func TestBeyond(t *testing.T) {
	for _, tc := range []struct {
		name      string
		g         string
		held      []string
		want      string
		redundant bool
	}{
		{"any value where today one value", "tool:invoke pay --to=*", []string{"tool:invoke pay --to=alice"},
			"tool:invoke pay with any --to= (today only --to=alice)", false},
		{"a second value", "tool:invoke pay --to=bob", []string{"tool:invoke pay --to=alice"},
			"tool:invoke pay with --to=bob (today only --to=alice)", false},
		{"covered by a glob", "tool:invoke pay --to=bob", []string{"tool:invoke pay --to=*"},
			"nothing new: tool:invoke pay --to=bob is covered by tool:invoke pay --to=*", true},
		{"covered by any arguments", "tool:invoke pay --amount=5 --to=bob", []string{"tool:invoke weather --...", "tool:invoke pay --..."},
			"nothing new: tool:invoke pay --amount=5 --to=bob is covered by tool:invoke pay --...", true},
		{"a tool never granted", "tool:invoke pay --to=*", []string{"tool:invoke weather --..."},
			"tool:invoke pay with any --to= (today nothing of pay)", false},
		{"any arguments of a new tool", "tool:invoke pay --...", nil,
			"tool:invoke pay with any arguments (today nothing of pay)", false},
		{"no arguments", "tool:invoke ping", nil,
			"tool:invoke ping with no arguments (today nothing of ping)", false},
		{"an argument never named", "tool:invoke pay --memo=* --to=alice", []string{"tool:invoke pay --to=alice"},
			"tool:invoke pay with any --memo= (today never --memo)", false},
		{"further arguments", "tool:invoke pay --to=alice --...", []string{"tool:invoke pay --to=alice"},
			"tool:invoke pay with any further arguments (today only the arguments named)", false},
		{"each argument somewhere, not together", "tool:invoke pay --amount=5 --to=bob",
			[]string{"tool:invoke pay --to=bob", "tool:invoke pay --amount=5"},
			"tool:invoke pay --amount=5 --to=bob (today only tool:invoke pay --to=bob, tool:invoke pay --amount=5)", false},
		{"a glob of tool names", "tool:invoke p* --...", []string{"tool:invoke pay --to=alice"},
			"tool:invoke p* with tools named p*, any further arguments (today only the arguments named)", false},
		{"approve always", "approve:always pay --to=*", []string{"approve:always pay --to=alice", "tool:invoke pay --to=*"},
			"approve:always pay with any --to= (today only --to=alice)", false},
		{"approve always is not tool invoke", "approve:always pay --to=bob", []string{"tool:invoke pay --..."},
			"approve:always pay with --to=bob (today nothing of pay)", false},
		{"write where today read", "fs:write /srv/app/**", []string{"fs:read /srv/**"},
			"write under /srv/app/** (today read only)", false},
		{"write wider than today", "fs:write /srv/app/**", []string{"fs:write /srv/app/logs/**"},
			"write under /srv/app/** (today only write under /srv/app/logs/**)", false},
		{"fs nothing today", "fs:read /etc/hosts", []string{"fs:read /srv/**"},
			"read /etc/hosts (today nothing there)", false},
		{"fs covered", "fs:read /srv/app/x", []string{"fs:* /srv/**"},
			"nothing new: fs:read /srv/app/x is covered by fs:* /srv/**", true},
		{"network", "network:connect *.example.com", []string{"network:connect api.example.com:443"},
			"network:connect *.example.com (today only network:connect api.example.com:443)", false},
		{"network none", "network:connect api.example.com", nil,
			"network:connect api.example.com (today no network grant of it)", false},
		{"secret", "secret:use B", []string{"secret:use A", "secret:use B*"},
			"nothing new: secret:use B is covered by secret:use B*", true},
		{"secret new", "secret:use *", []string{"secret:use A"},
			"secret:use * (today only secret:use A)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var held []Grant
			for _, h := range tc.held {
				held = append(held, mustParse(t, h))
			}
			got, red := Beyond(mustParse(t, tc.g), held, nil)
			if got != tc.want || red != tc.redundant {
				t.Errorf("Beyond(%q, %q)\n got %q (redundant %v)\nwant %q (redundant %v)", tc.g, tc.held, got, red, tc.want, tc.redundant)
			}
		})
	}
}

// TestBeyondPartial: a grant that allows only part of what it says is
// named beside the new one but never taken to cover it.
func TestBeyondPartial(t *testing.T) {
	got, red := Beyond(mustParse(t, "tool:invoke search --q=secret"), nil, []Grant{mustParse(t, "tool:invoke search --...")})
	if want := "tool:invoke search --q=secret (today only tool:invoke search --...)"; got != want || red {
		t.Errorf("got %q (redundant %v), want %q (not redundant)", got, red, want)
	}
}
