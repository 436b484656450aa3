package config

import "github.com/maiden-run/maiden/internal/regfile"

// MaxFileBytes caps agent.toml and every file it names that the loader reads
// (CA bundles): 4 MiB is far beyond any real configuration or CA bundle (the
// system bundle is ~200 KiB), and reading stops there, so /dev/zero or a
// runaway generator cannot grow the process without bound.
const MaxFileBytes = 4 << 20

// ErrNotRegular is wrapped by ReadFile's error for anything but a regular
// file: a FIFO would block forever, a device (/dev/zero) never ends.
var ErrNotRegular = regfile.ErrNotRegular

// ErrTooLarge is wrapped by ReadFile's error for a file over its cap.
var ErrTooLarge = regfile.ErrTooLarge

// ReadFile reads a configuration file of at most limit bytes (limit <= 0
// means MaxFileBytes) through internal/regfile: regular files only, the
// opened descriptor checked, at most limit+1 bytes read; errors are
// *fs.PathError naming the file.
func ReadFile(name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = MaxFileBytes
	}
	return regfile.Read(name, limit)
}
