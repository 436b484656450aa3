package worker

/*
#include <stdlib.h>
const char *maiden_confine_error(void);
const char *maiden_confine_note(void);
const char *maiden_confine_ids(void);
*/
import "C"

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
