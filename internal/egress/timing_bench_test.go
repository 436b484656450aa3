package egress

import (
	"bytes"
	"strconv"
	"testing"
)

// BenchmarkRedactGuessPrefix measures whether redacting a response costs
// more when it holds a guess sharing more leading bytes with the secret:
// the timing oracle a tool would use, with an echoing server, to learn a
// secret byte by byte (issue 26, hostile). The body is 1 MiB of repeats of
// a 32-byte guess whose first n bytes are the secret's and the rest not,
// so a per-byte difference is multiplied 32768 times. Compare ns/op across
// n (bench/ has no script for it: it is a yes/no question, answered in
// docs/credentials.md).
func BenchmarkRedactGuessPrefix(b *testing.B) {
	secret := "s3cr3t-0123456789abcdefghijklmnop"[:32]
	r := newRedactor([]secretValue{{"API_TOKEN", secret}})
	for _, n := range []int{0, 2, 4, 16, 31} {
		guess := []byte(secret[:n] + string(bytes.Repeat([]byte{'#'}, 32-n)))
		body := bytes.Repeat(guess, (1<<20)/32)
		b.Run("prefix="+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r.Bytes(body)
			}
		})
	}
}
