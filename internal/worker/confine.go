package worker

/*
#include <stdlib.h>
const char *maiden_confine_error(void);
const char *maiden_confine_note(void);
const char *maiden_confine_ids(void);
void *maiden_mailbox(void);
size_t maiden_mailbox_size(void);
*/
import "C"

import "unsafe"

// childMailboxes is the region shared with the parent, which the
// constructor in confine_linux.c mapped before the seccomp filter (nil if
// it did not, or if it is not the size this build expects).
func childMailboxes() []byte {
	p, n := C.maiden_mailbox(), int(C.maiden_mailbox_size())
	if p == nil || n != mailboxSize {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// confinementError is what went wrong confining this worker process ("" if
// nothing); the constructor in confine_linux.c did the work before the Go
// runtime started.
func confinementError() string { return C.GoString(C.maiden_confine_error()) }

// confinementNote says how the worker is confined (the Landlock ABI, or
// why Landlock is unavailable; started by root, its ids and capabilities).
func confinementNote() string {
	note := C.GoString(C.maiden_confine_note())
	if ids := C.GoString(C.maiden_confine_ids()); ids != "" {
		note += "; " + ids
	}
	return note
}
