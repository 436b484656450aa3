#include <stdint.h>

#define MAIDEN_NLIMITS 5

// One confined start; every pointer stays valid until maiden_spawn returns.
struct maiden_spawn {
	const char *path;
	char *const *argv;
	char *const *envp;
	const char *dir; // NULL: the current one
	int stdin_fd, stdout_fd, stderr_fd;
	int ruleset_fd; // -1: no Landlock
	int netns_fd;   // -1: stay in this network namespace
	int userns_fd;  // -1: stay in this user namespace (else joined before netns_fd)
	int status_fd;  // close-on-exec write end
	int parent_pid; // maiden's pid: the child's parent, unless maiden died since vfork
	uint64_t limits[MAIDEN_NLIMITS]; // core, data, nproc, fsize, nofile
	const void *filter;              // struct sock_filter[filter_len]
	unsigned filter_len;
};

// maiden_spawn returns the child's PID, or -errno if vfork failed.
int maiden_spawn(const struct maiden_spawn *a);
