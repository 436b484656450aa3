package toolbuild

import (
	"testing"

	"github.com/maiden-run/maiden/wit"
)

// TestContractFromCodeNotComments: the contract a JS or WAT source is built
// against follows what its code imports, never a comment (the JS template's
// comment names maiden:tool/host@0.3.0 while its code imports 0.2.0; picking
// 0.3.0 from the comment broke maiden new js).
func TestContractFromCodeNotComments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		src  string
		want wit.Contract
	}{
		{"// for reveal, import from \"maiden:tool/host@0.3.0\"\nimport { log } from \"maiden:tool/host@0.2.0\";\n", wit.V020},
		{"/*\n * maiden:tool/host@0.3.0 has reveal\n */\nimport { log } from \"maiden:tool/host@0.2.0\";\n", wit.V020},
		{"import { reveal } from \"maiden:tool/host@0.3.0\";\n", wit.V030},
		{"import {\n  log,\n  reveal,\n} from \"maiden:tool/host@0.3.0\";\n", wit.V030},
		{";; (import \"maiden:tool/host@0.3.0\" ...)\n(component (import \"maiden:tool/host@0.2.0\" (instance)))", wit.V020},
		{"export function execute() {}\n", wit.V010},
	} {
		if got := contractForText([]byte(tc.src)); got.Text != tc.want.Text {
			t.Errorf("%q: built against the wrong contract", tc.src)
		}
	}
}
