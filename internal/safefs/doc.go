// Package safefs reads, writes and lists files strictly beneath allowed roots, for maiden's fs_read, fs_write and
// fs_list built-in tools (Linux only).
//
// The caller passes the roots the session's boundary allows (each read-only or writable) and an absolute, normalised
// path. The path is matched against the roots lexically to choose one root; everything after that is resolved by the
// kernel relative to a descriptor of that root, so the check is the open and there is no window between them:
//
//   - openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS when the kernel has it (Linux 5.6+): symlinks and ".."
//     are followed only while they stay beneath the root; /proc magic links are refused.
//   - otherwise a component-by-component openat(2) walk with O_NOFOLLOW on every component: no symlink is followed
//     at all (stricter than openat2: a symlink that stays inside the root is refused too).
//
// Method reports which one this process uses. Errors are *Error values with a Kind (outside, not found, too large,
// is a directory, symlink escape, ...); see docs/safefs.md.
package safefs
